/**
 * Results as data: one file per benchmark under docs/results/<name>.jsonl,
 * one run per line, appended by the script that measured it. The docs show
 * the latest run of each as a table that scripts/docs/results-tables.ts
 * generates from these files, so a figure in the docs is always one a
 * script wrote, with its date, commit and machine beside it.
 *
 * A run is recorded only when asked (CRIDOCK_RECORD_RESULTS): a benchmark
 * tried with odd flags, or every CI run, must not rewrite the docs' data.
 *   CRIDOCK_RECORD_RESULTS=1      append to this repository's docs/results/
 *   CRIDOCK_RECORD_RESULTS=<dir>  append to <dir>/<name>.jsonl instead
 *   CRIDOCK_RESULTS_LABEL=<text>  the run's label (say "fresh" or "warm"):
 *                                 the docs show the latest run of each label
 *   CRIDOCK_RESULTS_MACHINE=<text> how to describe the machine, when the
 *                                 automatic description (CPU, cores, memory,
 *                                 kernel) leaves out what matters (its load)
 */
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { arch, cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** One cell of a results table: text as it is shown, or a number. */
export type Cell = string | number;

/** One recorded run of a benchmark: what the docs' table for it shows. */
export interface ResultRun {
  /** ISO 8601 date (YYYY-MM-DD) or date and time (UTC) of the run. */
  date: string;
  /** The commit measured (short hash; "-dirty" when the tree had changes). */
  commit: string;
  /** The machine it ran on, in words. */
  machine: string;
  /** The command that measured it, as typed. */
  command: string;
  /** Runs with different labels are shown side by side (the latest of each). */
  label?: string;
  /** What else the reader needs to read the figures (the engine, the load). */
  note?: string;
  columns: string[];
  rows: Cell[][];
}

/** The repository's docs/results directory (this file is scripts/bench/lib/results.ts). */
export const RESULTS_DIR = fileURLToPath(new URL("../../../docs/results/", import.meta.url));

const NAME = /^[a-z0-9][a-z0-9-]*$/;

/** Why RUN cannot be recorded or shown, or undefined when it is well-formed. */
export function runProblem(run: unknown): string | undefined {
  if (typeof run !== "object" || run === null) return "not an object";
  const r = run as Record<string, unknown>;
  for (const key of ["date", "commit", "machine", "command"] as const) {
    if (typeof r[key] !== "string" || (r[key] as string).length === 0) return `"${key}" is not a non-empty string`;
  }
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+Z)?$/.test(r.date as string)) return `"date" ${JSON.stringify(r.date)} is not YYYY-MM-DD or an ISO UTC time`;
  for (const key of ["label", "note"] as const) {
    if (r[key] !== undefined && typeof r[key] !== "string") return `"${key}" is not a string`;
  }
  if (!Array.isArray(r.columns) || r.columns.length === 0 || !r.columns.every((c) => typeof c === "string")) return '"columns" is not a list of strings';
  if (!Array.isArray(r.rows) || r.rows.length === 0) return '"rows" is not a non-empty list';
  for (const [i, row] of (r.rows as unknown[]).entries()) {
    if (!Array.isArray(row) || row.length !== r.columns.length) return `row ${i + 1} does not have ${r.columns.length} cells`;
    if (!row.every((c) => typeof c === "string" || (typeof c === "number" && Number.isFinite(c)))) return `row ${i + 1} holds a cell that is neither text nor a finite number`;
  }
  return undefined;
}

/** The runs of one results file, oldest first; throws naming the file and line of a malformed run. */
export function readRuns(file: string): ResultRun[] {
  const runs: ResultRun[] = [];
  for (const [i, line] of readFileSync(file, "utf8").split("\n").entries()) {
    if (line.trim() === "") continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (err) {
      throw new Error(`${file}:${i + 1}: not JSON: ${(err as Error).message}`, { cause: err });
    }
    const problem = runProblem(parsed);
    if (problem) throw new Error(`${file}:${i + 1}: ${problem}`);
    runs.push(parsed as ResultRun);
  }
  return runs;
}

/** The commit of the working tree, "-dirty" when it has changes; "unknown" outside a git checkout. */
export function currentCommit(cwd: string = fileURLToPath(new URL("../../../", import.meta.url))): string {
  try {
    const hash = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    return dirty === "" ? hash : `${hash}-dirty`;
  } catch {
    return "unknown";
  }
}

/** The machine in words: CPU model, cores, memory, kernel, architecture. */
export function describeMachine(): string {
  const list = cpus();
  const model = list[0]?.model.replace(/\s+/g, " ").trim() ?? "unknown CPU";
  return `${list.length} cores (${model}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Linux ${release()}, ${arch()}`;
}

/** Where CRIDOCK_RECORD_RESULTS asks runs to be written, or undefined when it does not. */
export function recordDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const asked = env.CRIDOCK_RECORD_RESULTS;
  if (asked === undefined || asked === "" || asked === "0") return undefined;
  return asked === "1" ? RESULTS_DIR : asked;
}

export interface RecordRequest {
  command: string;
  columns: string[];
  rows: Cell[][];
  note?: string;
}

/**
 * Appends one run of benchmark NAME when CRIDOCK_RECORD_RESULTS asks for it;
 * returns the file written, or undefined when nothing was asked. The date,
 * commit and machine are filled in here, so every script records them alike.
 */
export function recordResult(name: string, request: RecordRequest, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!NAME.test(name)) throw new Error(`results name ${JSON.stringify(name)} is not lower-case letters, digits and dashes`);
  const dir = recordDir(env);
  if (dir === undefined) return undefined;
  const run: ResultRun = {
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    commit: currentCommit(),
    machine: env.CRIDOCK_RESULTS_MACHINE || describeMachine(),
    command: request.command,
    ...(env.CRIDOCK_RESULTS_LABEL ? { label: env.CRIDOCK_RESULTS_LABEL } : {}),
    ...(request.note ? { note: request.note } : {}),
    columns: request.columns,
    rows: request.rows,
  };
  const problem = runProblem(run);
  if (problem) throw new Error(`cannot record ${name}: ${problem}`);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.jsonl`);
  appendFileSync(file, `${JSON.stringify(run)}\n`);
  console.log(`recorded in ${file} (scripts/docs/results-tables.ts puts it into the docs)`);
  return file;
}

/** The command line a script was run with, for the record: `tsx scripts/bench/x.ts --flag …`. */
export function commandLine(script: string, argv: readonly string[] = process.argv.slice(2)): string {
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`);
  return ["tsx", script, ...argv].map(quote).join(" ");
}
