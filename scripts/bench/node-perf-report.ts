/**
 * The figures of e2e_node.test's node performance specs (Density,
 * Resource-usage), side by side: each results directory
 * scripts/bench/node-perf.sh left (one per runtime, named after it) holds the
 * suite's perf data files (`performance-<type>-<prefix>-<test>.json`, the
 * PerfData the specs dump into --report-dir) and its per-spec lists
 * (scripts/k8s/conformance-results.ts). Prints, per spec, whether it passed,
 * then every data point of every runtime in one markdown table: pod startup
 * latency and throughput, and the "runtime" and "kubelet" system containers'
 * CPU percentiles and memory as the specs' cAdvisor pod measured them. With
 * two runtimes a last column gives the first ÷ the second.
 *
 * Usage: tsx scripts/bench/node-perf-report.ts RESULTS_DIR [RESULTS_DIR]
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { commandLine, recordResult } from "./lib/results.ts";

/** test/e2e/perftype's DataItem and PerfData, the fields read here. */
export interface DataItem {
  data: Record<string, number>;
  unit: string;
  labels?: Record<string, string>;
}
export interface PerfData {
  dataItems: DataItem[];
  labels?: Record<string, string>;
}

/** One data point: the spec's test name, what was measured, the bucket, its value. */
export interface Point {
  test: string;
  what: string;
  bucket: string;
  unit: string;
  value: number;
}

/** Labels that vary between runs without saying what was measured. */
const RUN_LABELS = new Set(["node", "timestamp"]);

/** A data item's own labels, as "datatype=latency latencytype=create-pod" (sorted, run labels left out). */
export function describeItem(item: DataItem): string {
  return Object.entries(item.labels ?? {})
    .filter(([key]) => !RUN_LABELS.has(key))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]) => `${key}=${value}`)
    .join(" ");
}

export function pointsOf(perf: PerfData, fallbackTest: string): Point[] {
  const test = perf.labels?.test ?? fallbackTest;
  return perf.dataItems.flatMap((item) =>
    Object.entries(item.data)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([bucket, value]) => ({ test, what: describeItem(item), bucket, unit: item.unit, value })),
  );
}

/** Every point of the perf data files in `dir`. */
export function readPoints(dir: string): Point[] {
  return readdirSync(dir)
    .filter((name) => name.startsWith("performance-") && name.endsWith(".json"))
    .sort()
    .flatMap((name) => pointsOf(JSON.parse(readFileSync(join(dir, name), "utf8")) as PerfData, name));
}

/** The spec outcomes of conformance-results.ts' specs.tsv, for the specs that ran. */
function outcomes(dir: string): string[] {
  const file = join(dir, "specs.tsv");
  if (!existsSync(file)) return [`(no specs.tsv in ${dir})`];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => /^(passed|failed|skipped)\t/.test(line))
    .map((line) => line.replace("\t", "  "));
}

const key = (p: Point) => `${p.test}\u0000${p.what}\u0000${p.bucket}\u0000${p.unit}`;

function format(value: number | undefined): string {
  if (value === undefined) return "–";
  return Math.abs(value) >= 100 ? value.toFixed(0) : Math.abs(value) >= 1 ? value.toFixed(2) : value.toFixed(3);
}

/** The markdown table of every point of every runtime, in first-seen order. */
export function table(runs: { name: string; points: Point[] }[]): string[] {
  const rows = new Map<string, Point>();
  const values = runs.map((run) => new Map(run.points.map((p) => [key(p), p.value])));
  for (const run of runs) for (const p of run.points) if (!rows.has(key(p))) rows.set(key(p), p);
  const ratio = runs.length === 2;
  const lines = [
    `| test | measured | bucket | unit | ${runs.map((r) => r.name).join(" | ")} |${ratio ? ` ${runs[0]!.name} ÷ ${runs[1]!.name} |` : ""}`,
    `|---|---|---|---|${runs.map(() => "---|").join("")}${ratio ? "---|" : ""}`,
  ];
  for (const [k, p] of rows) {
    const cells = values.map((v) => v.get(k));
    const quotient = ratio && cells[0] !== undefined && cells[1] ? format(cells[0] / cells[1]) : "–";
    lines.push(`| ${p.test} | ${p.what} | ${p.bucket} | ${p.unit} | ${cells.map(format).join(" | ")} |${ratio ? ` ${quotient} |` : ""}`);
  }
  return lines;
}

function main(dirs: string[]): void {
  if (dirs.length < 1 || dirs.length > 2) throw new Error("usage: node-perf-report.ts RESULTS_DIR [RESULTS_DIR]");
  const runs = dirs.map((dir) => ({ name: basename(dir), dir, points: readPoints(dir) }));
  for (const run of runs) {
    console.log(`## ${run.name} (${run.dir})`);
    for (const line of outcomes(run.dir)) console.log(`  ${line}`);
  }
  console.log("");
  const lines = table(runs);
  for (const line of lines) console.log(line);
  // The record: the same table, its cells as text (the header and the rule line dropped).
  const cells = (line: string) => line.slice(1, -1).split(" | ").map((c) => c.trim());
  recordResult("node-perf", { command: commandLine("scripts/bench/node-perf-report.ts"), columns: cells(lines[0]!), rows: lines.slice(2).map(cells), note: runs.map((r) => `${r.name}: ${outcomes(r.dir).join("; ")}`).join(". ") });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) main(process.argv.slice(2));
