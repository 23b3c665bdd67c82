/**
 * Writes the docs' results tables from the data: between the markers
 *
 *   <!-- results-table: NAME -->
 *   <!-- /results-table -->
 *
 * in README.md and docs/**\/*.md goes the latest run of docs/results/NAME.jsonl
 * (the latest of each label, when its runs carry labels), with its date,
 * commit, machine and command, and a link to every run. The benchmarks and
 * CI's timing append the runs (scripts/bench/lib/results.ts); this script
 * only shows them, so a table is never edited by hand.
 *
 * Usage: tsx scripts/docs/results-tables.ts [--check]
 *   --check  change nothing; exit 1 naming each table that differs from its data
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readRuns, RESULTS_DIR, type Cell, type ResultRun } from "../bench/lib/results.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const BLOCK = /(<!-- results-table: ([a-z0-9-]+) -->\n)([\s\S]*?)(<!-- \/results-table -->)/g;

function cell(c: Cell): string {
  return String(c).replace(/\|/g, "\\|").replace(/\n/g, " ");
}

/** The latest run of each label, in the order the labels first appear (unlabelled runs are one label). */
export function latestRuns(runs: readonly ResultRun[]): ResultRun[] {
  const latest = new Map<string, ResultRun>();
  for (const run of runs) {
    const key = run.label ?? "";
    const seen = latest.get(key);
    if (!seen || run.date >= seen.date) latest.set(key, run);
  }
  return [...latest.values()];
}

/** The Markdown a table's block holds: for each run shown, one line saying what it is, then its table. */
export function renderRuns(runs: readonly ResultRun[], dataLink: string): string {
  const parts = latestRuns(runs).map((run) => {
    const label = run.label ? `**${run.label}**, ` : "";
    const note = run.note ? ` ${run.note.trim()}` : "";
    const about = `${label}${run.date.slice(0, 10)}, commit \`${run.commit}\`, ${run.machine}: \`${run.command}\`.${note}`;
    const lines = [
      `| ${run.columns.map(cell).join(" | ")} |`,
      `|${run.columns.map(() => "---").join("|")}|`,
      ...run.rows.map((row) => `| ${row.map(cell).join(" | ")} |`),
    ];
    return `${about}\n\n${lines.join("\n")}\n`;
  });
  const count = runs.length === 1 ? "the one run recorded" : `all ${runs.length} runs recorded`;
  return `${parts.join("\n")}\nData: [${dataLink.split("/").pop()}](${dataLink}) (${count}).\n`;
}

/**
 * TEXT (a doc at DOC_PATH, absolute) with every results block rewritten from
 * the files in RESULTS; the names of the blocks whose data file is missing.
 */
export function rewriteDoc(text: string, docPath: string, resultsDir: string = RESULTS_DIR): { text: string; missing: string[] } {
  const missing: string[] = [];
  const out = text.replace(BLOCK, (whole, open: string, name: string, _body: string, close: string) => {
    const file = join(resultsDir, `${name}.jsonl`);
    let runs: ResultRun[];
    try {
      runs = readRuns(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        missing.push(name);
        return whole;
      }
      throw err;
    }
    if (runs.length === 0) {
      missing.push(name);
      return whole;
    }
    const link = relative(dirname(docPath), file).split("\\").join("/");
    return `${open}\n${renderRuns(runs, link)}\n${close}`;
  });
  return { text: out, missing };
}

/** README.md and every Markdown file under docs/, absolute. */
export function docFiles(root: string = ROOT): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : []));
  return [join(root, "README.md"), ...walk(join(root, "docs"))];
}

/** The tables that differ from their data (docs relative to ROOT), after writing them unless CHECK. */
export function updateDocs(check: boolean, root: string = ROOT, resultsDir: string = RESULTS_DIR): { stale: string[]; missing: string[] } {
  const stale: string[] = [];
  const missing: string[] = [];
  for (const file of docFiles(root)) {
    const before = readFileSync(file, "utf8");
    const after = rewriteDoc(before, file, resultsDir);
    missing.push(...after.missing.map((name) => `${relative(root, file)}: ${name}`));
    if (after.text === before) continue;
    stale.push(relative(root, file));
    if (!check) writeFileSync(file, after.text);
  }
  return { stale, missing };
}

function main(argv: string[]): number {
  const check = argv.includes("--check");
  const unknown = argv.filter((a) => a !== "--check");
  if (unknown.length > 0) {
    console.error(`usage: tsx scripts/docs/results-tables.ts [--check] (unknown: ${unknown.join(" ")})`);
    return 2;
  }
  const { stale, missing } = updateDocs(check);
  for (const m of missing) console.error(`no data for the table ${m} (docs/results/<name>.jsonl)`);
  if (check && stale.length > 0) {
    console.error(`results tables out of date with docs/results/ in: ${stale.join(", ")}; run tsx scripts/docs/results-tables.ts`);
    return 1;
  }
  if (!check) for (const file of stale) console.log(`rewrote the results tables of ${file}`);
  return missing.length > 0 ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exit(main(process.argv.slice(2)));
