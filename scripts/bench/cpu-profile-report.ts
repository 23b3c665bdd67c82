/**
 * Prints where a cridock CPU profile's time went, by part (the garbage
 * collector, V8's own work, Node's internals, each npm package, each folder
 * of src/), the builtins and the busiest functions: the figures behind
 * docs/performance.md's profiles. The profile comes from a benchmark's
 * --cpu-prof (e.g. scripts/bench/kubelet-pods.ts, which prints its phases on
 * the profile's clock for --from and --to). For the bundle's parts, build it
 * with its source map first: `CRIDOCK_BUNDLE_SOURCEMAP=1 npm run build`.
 * A profile of the executable (binary.ts --node-option=--cpu-prof, with
 * CRIDOCK_BUNDLE_SOURCEMAP=1 for its map beside it) names its script by
 * the path it was built at, ending in cridock.cjs: give --map
 * EXECUTABLE.map --bundle-name cridock.cjs.
 *
 *   npx tsx scripts/bench/cpu-profile-report.ts PROFILE [--map dist/cridock.js.map] [--bundle-name cridock.js] [--from µs] [--to µs] [--top 15]
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { parseArgs } from "node:util";
import { summarize, type CpuProfile, type SourceMap } from "./lib/cpu-profile-summary.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    map: { type: "string" },
    "bundle-name": { type: "string" },
    from: { type: "string" },
    to: { type: "string" },
    top: { type: "string", default: "15" },
  },
});
if (positionals.length !== 1) {
  console.error("usage: cpu-profile-report.ts PROFILE [--map FILE] [--bundle-name NAME] [--from µs] [--to µs] [--top N]");
  process.exit(2);
}

const micros = (name: string, v: string | undefined) => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`--${name} takes µs on the profile's clock, not '${v}'`);
  return n;
};
const mapFile = values.map ?? (existsSync("dist/cridock.js.map") ? "dist/cridock.js.map" : undefined);
// A map from another build than the profiled bundle names the wrong modules.
if (mapFile && !values.map && existsSync("dist/cridock.js") && statSync("dist/cridock.js").mtimeMs > statSync(mapFile).mtimeMs + 60_000) {
  console.error(`warning: ${mapFile} is older than dist/cridock.js (built without CRIDOCK_BUNDLE_SOURCEMAP=1 since?): its modules may not match the profile`);
}
const profile = JSON.parse(readFileSync(positionals[0]!, "utf8")) as CpuProfile;
const map = mapFile ? (JSON.parse(readFileSync(mapFile, "utf8")) as SourceMap) : undefined;
const top = Number(values.top);
const summary = summarize(profile, { from: micros("from", values.from), to: micros("to", values.to), map, bundleName: values["bundle-name"] });

const busy = summary.windowMicros - summary.idleMicros;
const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
const share = (us: number) => `${((100 * us) / Math.max(busy, 1)).toFixed(1).padStart(5)} %`;
console.log(`window ${(summary.windowMicros / 1e6).toFixed(2)} s, main thread busy ${(busy / 1e6).toFixed(2)} s${map ? "" : " (no source map: the bundle is one part)"}`);
console.log("\nby part (ms, share of busy):");
for (const p of summary.parts) console.log(`${ms(p.micros)} ${share(p.micros)}  ${p.part}`);
console.log(`\nbuiltins, top ${top} (their time is in their caller's part too):`);
for (const b of summary.builtins.slice(0, top)) console.log(`${ms(b.micros)} ${share(b.micros)}  ${b.name}`);
console.log(`\nfunctions by self time, top ${top}:`);
for (const f of summary.functions.slice(0, top)) console.log(`${ms(f.micros)} ${share(f.micros)}  ${f.name}  [${f.part}]`);
