/**
 * Builds dist/cridock.js: cridock's sources and dependencies bundled into one
 * ES module with esbuild (the bundler tsx itself runs on). Node then starts
 * without tsx transpiling ~150 files and without loading tsx, esbuild's
 * service and duplicate module graphs: smaller and faster to start than the
 * development path. bin/cridock.js runs the bundle when it is present and
 * not older than the sources; Deno and development keep running src/. The
 * CRI proto's text is embedded (src/cri/proto.ts), so the bundle reads no
 * file of the package at run time; scripts/build/binary.ts builds the
 * self-contained executable from the same options.
 *
 * Another entry point can be bundled the same way, into a file that runs
 * with node alone where the repository is not (scripts/bench/in-vm.sh).
 *
 *   tsx scripts/build/bundle.ts                 (npm run build; npm's prepack runs it)
 *   tsx scripts/build/bundle.ts ENTRY OUTFILE   (another entry point, relative to the package root)
 *   CRIDOCK_BUNDLE_SOURCEMAP=1 …               (also OUTFILE.map, for reading CPU profiles)
 *   CRIDOCK_BUILD_COMMIT=<40 hex>[-dirty] …     (the commit to bake in where there is no git checkout)
 *
 * Every build bakes in the commit it was built from (src/version.ts prints
 * it with --version): git's HEAD of this checkout, "-dirty" with changes
 * not committed, or "unknown" outside a checkout.
 */
import { build, type BuildOptions, type Plugin } from "esbuild";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gitCommit, UNKNOWN_COMMIT, validCommit } from "../../src/version.ts";

export const root = fileURLToPath(new URL("../../", import.meta.url));

/** The commit a build bakes in: CRIDOCK_BUILD_COMMIT when set (it must be a commit id), else git's, else "unknown". */
export function buildCommit(env: NodeJS.ProcessEnv = process.env, checkout: string = root): string {
  const given = env.CRIDOCK_BUILD_COMMIT;
  if (given !== undefined && given !== "") {
    const commit = validCommit(given);
    if (!commit) throw new Error(`CRIDOCK_BUILD_COMMIT=${JSON.stringify(given.slice(0, 80))} is not a commit id (40 hex digits, optionally -dirty)`);
    return commit;
  }
  return gitCommit(checkout) ?? UNKNOWN_COMMIT;
}

/**
 * @grpc/proto-loader, left out: grpc-js requires it only inside its channelz
 * and ORCA code (channelz is off in cridock, ORCA is for clients), yet a
 * bundle carries it, a second protobufjs (7.x, its own dependency) and long:
 * about 330 KiB of source that V8 keeps in memory for as long as cridock
 * runs. Should grpc-js ever reach for it, the require fails and says why.
 */
export const withoutProtoLoader: Plugin = {
  name: "without-proto-loader",
  setup(b) {
    b.onResolve({ filter: /^@grpc\/proto-loader$/ }, () => ({ path: "@grpc/proto-loader", namespace: "not-bundled" }));
    b.onLoad({ filter: /.*/, namespace: "not-bundled" }, () => ({
      contents: 'throw new Error("@grpc/proto-loader is not in cridock\'s bundle: gRPC channelz and ORCA are not served");',
      loader: "js",
    }));
  },
};

/**
 * Throws unless a built script is ASCII. V8 keeps a script's source text for
 * as long as cridock runs, and Node hands V8 a non-ASCII UTF-8 file (or
 * executable blob) as UTF-16: one "µ" in 2 MB of bundle kept 4.2 MB of source
 * in the heap instead of 2.1 (a heap snapshot of the idle daemon). esbuild
 * escapes non-ASCII in strings and identifiers but leaves a regular
 * expression literal's characters as they are; write those as \u escapes.
 */
export function assertAscii(file: string, text: string): void {
  const at = text.search(/[^\x00-\x7f]/);
  if (at < 0) return;
  const line = text.slice(0, at).split("\n").length;
  const context = text.slice(Math.max(0, at - 40), at + 20).replace(/\s+/g, " ");
  throw new Error(
    `${file}: non-ASCII ${JSON.stringify(text[at])} (U+${text.codePointAt(at)!.toString(16).toUpperCase().padStart(4, "0")}) on line ${line}, in "${context}": ` +
      "V8 would keep the whole script as UTF-16, twice its size; write it as a \\u escape in the source",
  );
}

/** What every build of cridock shares: the oldest Node it runs on (package.json's engines), the proto and the commit embedded, names kept, what is never loaded left out. */
export function commonOptions(): BuildOptions {
  const proto = readFileSync(`${root}proto/runtime/v1/api.proto`, "utf8");
  return {
    absWorkingDir: root,
    bundle: true,
    platform: "node",
    target: "node26",
    // src/cri/proto.ts parses this text instead of reading proto/ beside the package;
    // src/version.ts prints this commit instead of asking git.
    define: { CRIDOCK_PROTO_TEXT: JSON.stringify(proto), CRIDOCK_BUILD_COMMIT: JSON.stringify(buildCommit()) },
    // Optional native speed-ups of ws; it works without them, and cridock uses no native addons.
    external: ["bufferutil", "utf-8-validate"],
    plugins: [withoutProtoLoader],
    // Whitespace and syntax only: identifiers stay, so stack traces and logged class names read as in src/.
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: "linked",
    metafile: true,
    logLevel: "warning",
  };
}

/** Bundles `entry` (src/main.ts) into `outfile`, both relative to the package root. */
export async function buildBundle(outfile = "dist/cridock.js", entry = "src/main.ts"): Promise<{ bytes: number; modules: number }> {
  const result = await build({
    ...commonOptions(),
    entryPoints: [entry],
    outfile,
    format: "esm",
    // For reading CPU profiles by module (scripts/bench/cpu-profile-report.ts): a map beside the
    // bundle, the bundle itself unchanged (no reference to it), and never shipped.
    sourcemap: process.env.CRIDOCK_BUNDLE_SOURCEMAP === "1" ? "external" : false,
    // Dependencies written as CommonJS call require(): give the ES module one.
    banner: { js: 'import { createRequire as __cridockCreateRequire } from "node:module"; const require = __cridockCreateRequire(import.meta.url);' },
  });
  assertAscii(outfile, readFileSync(resolve(root, outfile), "utf8"));
  const meta = result.metafile!;
  const bytes = Object.entries(meta.outputs).reduce((sum, [name, o]) => (name.endsWith(".map") ? sum : sum + o.bytes), 0);
  return { bytes, modules: Object.keys(meta.inputs).length };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [entry, outfile, ...extra] = process.argv.slice(2);
  if ((entry === undefined) !== (outfile === undefined) || extra.length > 0) {
    console.error("usage: tsx scripts/build/bundle.ts [ENTRY OUTFILE]");
    process.exit(2);
  }
  const { bytes, modules } = await buildBundle(outfile, entry);
  // stderr: npm runs this as prepack, and `npm pack --json` callers read stdout as JSON.
  console.error(`${outfile ?? "dist/cridock.js"}: ${(bytes / 1024).toFixed(0)} KiB from ${modules} modules`);
}
