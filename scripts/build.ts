/**
 * Builds dist/cridock.js: cridock's sources and dependencies bundled into one
 * ES module with esbuild (the bundler tsx itself runs on). Node then starts
 * without tsx transpiling ~150 files and without loading tsx, esbuild's
 * service and duplicate module graphs: smaller and faster to start than the
 * development path. bin/cridock.js runs the bundle when it is present and
 * not older than the sources; Deno and development keep running src/.
 *
 *   tsx scripts/build.ts      (npm run build; npm's prepack runs it)
 */
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));

/** Bundles src/main.ts into `outfile` (relative to the package root; it must sit one folder below it). */
export async function buildBundle(outfile = "dist/cridock.js"): Promise<{ bytes: number; modules: number }> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: ["src/main.ts"],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Dependencies written as CommonJS call require(): give the ES module one.
    banner: { js: 'import { createRequire as __cridockCreateRequire } from "node:module"; const require = __cridockCreateRequire(import.meta.url);' },
    // src/cri/proto.ts finds the proto relative to itself: dist/ is one folder below the package root, not two.
    define: { CRIDOCK_BUNDLE: "true" },
    // Optional native speed-ups of ws; it works without them, and cridock uses no native addons.
    external: ["bufferutil", "utf-8-validate"],
    // Whitespace and syntax only: identifiers stay, so stack traces and logged class names read as in src/.
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: "linked",
    metafile: true,
    logLevel: "warning",
  });
  const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  return { bytes, modules: Object.keys(result.metafile.inputs).length };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { bytes, modules } = await buildBundle();
  // stderr: npm runs this as prepack, and `npm pack --json` callers read stdout as JSON.
  console.error(`dist/cridock.js: ${(bytes / 1024).toFixed(0)} KiB from ${modules} modules`);
}
