/**
 * Where a V8 CPU profile's time went, by part: the garbage collector, V8's
 * own work, Node's internals, each npm package, each folder of cridock's
 * src/. cridock runs from its bundle, one file for all of it: a source map
 * of that bundle (`CRIDOCK_BUNDLE_SOURCEMAP=1 npm run build`) names the
 * module behind each function. The benchmarks print their phases on the
 * profile's clock, so a summary can be cut to one of them.
 *
 * A sample's time is the gap to the next sample, as DevTools counts it. A
 * V8 builtin (JSON.parse, a RegExp, a typed array's copy) has no script, so
 * its time is put to the part that called it and also listed as a builtin.
 */

/** The parts of the .cpuprofile JSON that are read. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

/** A source map (version 3) of the bundle: which source each generated position came from. */
export interface SourceMap {
  sources: string[];
  mappings: string;
}

export interface Summary {
  /** The window summed, µs. */
  windowMicros: number;
  /** Samples outside (idle): µs. */
  idleMicros: number;
  /** µs by part, the largest first. */
  parts: { part: string; micros: number }[];
  /** Builtins by name (their time is also in their caller's part), the largest first. */
  builtins: { name: string; micros: number }[];
  /** Functions with a script by self time, the largest first. */
  functions: { name: string; part: string; micros: number }[];
}

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Per generated line, its segments' [generated column, source index], in column order. */
export type LineIndex = [number, number][][];

/** Decodes a source map's mappings into a lookup of generated (line, column) → source index. */
export function indexSourceMap(map: SourceMap): LineIndex {
  const lines: LineIndex = [];
  let source = 0;
  for (const line of map.mappings.split(";")) {
    const segments: [number, number][] = [];
    let column = 0;
    for (const segment of line.split(",")) {
      if (!segment) continue;
      const fields = decodeVlq(segment);
      column += fields[0]!;
      if (fields.length >= 4) {
        source += fields[1]!;
        segments.push([column, source]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

function decodeVlq(segment: string): number[] {
  const out: number[] = [];
  let value = 0;
  let shift = 0;
  for (const ch of segment) {
    const digit = BASE64.indexOf(ch);
    if (digit < 0) throw new Error(`source map: '${ch}' is not a base64 digit`);
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
      continue;
    }
    out.push(value & 1 ? -(value >>> 1) : value >>> 1);
    value = 0;
    shift = 0;
  }
  return out;
}

/** The source of a generated position (0-based line and column), or undefined. */
export function sourceAt(index: LineIndex, map: SourceMap, line: number, column: number): string | undefined {
  const segments = index[line];
  if (!segments || segments.length === 0) return undefined;
  let lo = 0;
  let hi = segments.length - 1;
  if (segments[0]![0] > column) return undefined;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (segments[mid]![0] <= column) lo = mid;
    else hi = mid - 1;
  }
  return map.sources[segments[lo]![1]];
}

/**
 * The part a source path belongs to: "@grpc/grpc-js" for a file of that
 * package under node_modules, "src/docker" for cridock's src/docker/x.ts.
 */
export function partOfSource(source: string): string {
  const nm = source.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = source.slice(nm + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const src = source.indexOf("src/");
  if (src >= 0) {
    const rest = source.slice(src).split("/");
    return rest.length > 2 ? `${rest[0]}/${rest[1]}` : "src";
  }
  return source;
}

/** What a call frame is: a V8 pseudo-frame, a builtin, Node's internals, or a script's part. */
function classify(frame: ProfileNode["callFrame"], partOfBundle: (line: number, column: number) => string | undefined): { kind: "meta" | "builtin" | "script"; part: string } {
  const { functionName, url } = frame;
  if (!url) {
    if (functionName === "(garbage collector)") return { kind: "meta", part: "V8: garbage collector" };
    if (functionName === "(program)") return { kind: "meta", part: "V8: program (compiler, runtime, no JS frame)" };
    if (functionName === "(idle)") return { kind: "meta", part: "(idle)" };
    if (functionName === "(root)") return { kind: "meta", part: "(root)" };
    return { kind: "builtin", part: `builtin ${functionName || "(anonymous)"}` };
  }
  if (url.startsWith("node:")) {
    const name = url.slice("node:".length).replace(/^internal\//, "");
    return { kind: "script", part: `node: ${name.split("/")[0]}` };
  }
  const bundled = partOfBundle(frame.lineNumber, frame.columnNumber);
  if (bundled) return { kind: "script", part: bundled };
  if (url.includes("node_modules/") || url.includes("/src/")) return { kind: "script", part: partOfSource(url.replace(/^file:\/\//, "")) };
  return { kind: "script", part: url.replace(/^file:\/\//, "") };
}

/**
 * Sums the profile's samples between `from` and `to` (µs on its clock;
 * the whole profile without them) by part. `map` maps positions in the
 * bundle's URL (ending in `bundleName`) to sources.
 */
export function summarize(profile: CpuProfile, options: { from?: number; to?: number; map?: SourceMap; bundleName?: string } = {}): Summary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const index = options.map ? indexSourceMap(options.map) : undefined;
  const bundleName = options.bundleName ?? "cridock.js";
  const classified = new Map<number, { kind: string; part: string; name: string }>();
  const classOf = (id: number) => {
    let c = classified.get(id);
    if (c) return c;
    const node = byId.get(id)!;
    const inBundle = index && node.callFrame.url.endsWith(bundleName);
    const found = classify(node.callFrame, (line, column) => {
      if (!inBundle) return undefined;
      const source = sourceAt(index, options.map!, line, column);
      return source ? partOfSource(source) : undefined;
    });
    c = { ...found, name: node.callFrame.functionName || "(anonymous)" };
    classified.set(id, c);
    return c;
  };
  // A builtin's time goes to the nearest caller with a script.
  const ownerOf = (id: number): string => {
    let at: number | undefined = id;
    while (at !== undefined) {
      const c = classOf(at);
      if (c.kind !== "builtin") return c.part;
      at = parent.get(at);
    }
    return "builtin without a caller";
  };

  const from = options.from ?? -Infinity;
  const to = options.to ?? Infinity;
  const parts = new Map<string, number>();
  const builtins = new Map<string, number>();
  const functions = new Map<string, { name: string; part: string; micros: number }>();
  let window = 0;
  let idle = 0;
  let time = profile.startTime;
  const times = profile.samples.map((_, i) => (time += profile.timeDeltas[i] ?? 0));
  for (let i = 0; i < profile.samples.length; i++) {
    const at = times[i]!;
    const next = i + 1 < times.length ? times[i + 1]! : profile.endTime;
    // The part of this sample's span inside the window.
    const micros = Math.max(0, Math.min(next, to) - Math.max(at, from));
    if (micros <= 0) continue;
    window += micros;
    const id = profile.samples[i]!;
    const c = classOf(id);
    if (c.part === "(idle)") {
      idle += micros;
      continue;
    }
    const part = c.kind === "builtin" ? ownerOf(id) : c.part;
    parts.set(part, (parts.get(part) ?? 0) + micros);
    if (c.kind === "builtin") builtins.set(c.name, (builtins.get(c.name) ?? 0) + micros);
    else if (c.kind === "script") {
      const key = `${c.name}\u0000${c.part}`;
      const f = functions.get(key) ?? { name: c.name, part: c.part, micros: 0 };
      f.micros += micros;
      functions.set(key, f);
    }
  }
  const sorted = <T extends { micros: number }>(xs: Iterable<T>) => [...xs].sort((a, b) => b.micros - a.micros);
  return {
    windowMicros: window,
    idleMicros: idle,
    parts: sorted([...parts].map(([part, micros]) => ({ part, micros }))),
    builtins: sorted([...builtins].map(([name, micros]) => ({ name, micros }))),
    functions: sorted(functions.values()),
  };
}
