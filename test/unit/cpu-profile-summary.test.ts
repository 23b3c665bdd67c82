/**
 * scripts/bench/lib/cpu-profile-summary.ts: a CPU profile's samples summed
 * by part, through a real esbuild source map of a bundle built like
 * cridock's (whitespace-minified), with builtins put to their caller and
 * the window cut on the profile's clock.
 */
import t from "tap";
import { build } from "esbuild";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { indexSourceMap, partOfSource, sourceAt, summarize, type CpuProfile, type SourceMap } from "../../scripts/bench/lib/cpu-profile-summary.ts";

t.test("a source path's part: an npm package (scoped or not), a folder of src/", async (t) => {
  t.equal(partOfSource("../node_modules/@grpc/grpc-js/build/src/server.js"), "@grpc/grpc-js");
  t.equal(partOfSource("node_modules/undici/lib/core/request.js"), "undici");
  t.equal(partOfSource("src/docker/list-cache.ts"), "src/docker");
  t.equal(partOfSource("src/main.ts"), "src");
});

t.test("positions in a whitespace-minified esbuild bundle map back to their sources", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cpu-profile-summary-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, "node_modules", "@scope", "lib"), { recursive: true });
  await mkdir(join(dir, "src", "docker"), { recursive: true });
  await writeFile(join(dir, "node_modules", "@scope", "lib", "index.js"), "export function packageWork(x) { return 'PKG_MARKER' + x; }\n");
  await writeFile(join(dir, "src", "docker", "client.ts"), "export function dockerWork(x: string) { return 'DOCKER_MARKER' + x; }\n");
  await writeFile(join(dir, "src", "main.ts"), "import { packageWork } from '@scope/lib';\nimport { dockerWork } from './docker/client.ts';\nconsole.log(packageWork('a'), dockerWork('b'), 'MAIN_MARKER');\n");
  const result = await build({
    absWorkingDir: dir,
    entryPoints: ["src/main.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    minifyWhitespace: true,
    sourcemap: "external",
    outfile: join(dir, "out.js"),
    write: false,
  });
  const code = result.outputFiles.find((f) => f.path.endsWith("out.js"))!.text;
  const map = JSON.parse(result.outputFiles.find((f) => f.path.endsWith(".map"))!.text) as SourceMap;
  const index = indexSourceMap(map);
  const positionOf = (marker: string) => {
    const at = code.indexOf(marker);
    const before = code.slice(0, at);
    const line = before.split("\n").length - 1;
    return { line, column: at - (before.lastIndexOf("\n") + 1) };
  };
  for (const [marker, part] of [
    ["PKG_MARKER", "@scope/lib"],
    ["DOCKER_MARKER", "src/docker"],
    ["MAIN_MARKER", "src"],
  ] as const) {
    const { line, column } = positionOf(marker);
    t.equal(partOfSource(sourceAt(index, map, line, column) ?? ""), part, `${marker} is ${part}'s`);
  }
  t.equal(sourceAt(index, map, 10_000, 0), undefined, "a line past the map has no source");
});

t.test("samples summed by part in the window; a builtin goes to its caller; idle is not busy", async (t) => {
  // A map of one generated line: columns 0-9 from node_modules/undici, 10- from src/cri.
  const map: SourceMap = { sources: ["node_modules/undici/lib/a.js", "src/cri/server.ts"], mappings: "AAAA,UCAA" };
  const frame = (functionName: string, url: string, columnNumber = 0) => ({ functionName, url, lineNumber: 0, columnNumber, scriptId: "0" });
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame("(root)", ""), children: [2, 3, 4, 6, 7] },
      { id: 2, callFrame: frame("request", "file:///x/dist/cridock.js", 3), children: [5] },
      { id: 3, callFrame: frame("serve", "file:///x/dist/cridock.js", 12) },
      { id: 4, callFrame: frame("(garbage collector)", "") },
      { id: 5, callFrame: frame("parse", "") },
      { id: 6, callFrame: frame("(idle)", "") },
      { id: 7, callFrame: frame("emit", "node:events") },
    ],
    startTime: 1000,
    endTime: 1000 + 70,
    // One sample every 10 µs from 1010: undici, its parse, cri, GC, idle, events, cri.
    samples: [2, 5, 3, 4, 6, 7, 3],
    timeDeltas: [10, 10, 10, 10, 10, 10, 10],
  };
  const all = summarize(profile, { map });
  const parts = Object.fromEntries(all.parts.map((p) => [p.part, p.micros]));
  t.same(parts, { undici: 20, "src/cri": 10 + 0, "V8: garbage collector": 10, "node: events": 10 }, "the last sample ends at endTime (1070): no time");
  t.equal(all.idleMicros, 10);
  t.same(all.builtins, [{ name: "parse", micros: 10 }], "a builtin is listed by name and counted in its caller's part");
  t.equal(all.functions[0]!.name, "request");

  const cut = summarize(profile, { map, from: 1025, to: 1045 });
  t.equal(cut.windowMicros, 20, "the window keeps only its share of the samples");
  t.same(
    Object.fromEntries(cut.parts.map((p) => [p.part, p.micros])),
    { undici: 5, "src/cri": 10, "V8: garbage collector": 5 },
    "the halves of the parse (undici's) and the GC samples, the cri sample whole",
  );
  t.equal(cut.idleMicros, 0, "the idle sample starts at the window's end");

  const unmapped = summarize(profile);
  t.ok(unmapped.parts.some((p) => p.part === "/x/dist/cridock.js"), "without a map the bundle is one part");
});
