/**
 * A fixed list of Kubernetes e2e specs, named in full one a line (comments
 * after "#"), as the CI's bounded e2e run takes it
 * (test/cluster/e2e-conformance.txt):
 *
 *   focus LIST            prints one ginkgo --focus regex that matches exactly
 *                         the listed names (each escaped, so a name is text,
 *                         not a pattern)
 *   missing LIST SPECS    prints the listed names that the run's specs.tsv
 *                         (scripts/conformance-results.ts) does not show as
 *                         run, and exits 1 if there are any: a spec renamed
 *                         upstream must not drop out of the run unnoticed
 *
 * Usage: tsx scripts/e2e-spec-list.ts focus LIST | missing LIST SPECS_TSV
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** The spec names of a list file's text: "#" starts a comment, blank lines are ignored, duplicates refused. */
export function parseSpecList(text: string, source: string): string[] {
  const names: string[] = [];
  const seen = new Set<string>();
  text.split("\n").forEach((raw, i) => {
    const name = raw.replace(/(^|\s)#.*$/, "").trim();
    if (name === "") return;
    if (seen.has(name)) throw new Error(`${source}:${i + 1}: "${name}" is listed twice`);
    seen.add(name);
    names.push(name);
  });
  if (names.length === 0) throw new Error(`${source} names no spec`);
  return names;
}

/** A Go (RE2) regex matching each name literally. */
export function focusRegex(names: string[]): string {
  return names.map((n) => n.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&")).join("|");
}

/** The listed names that specs.tsv (state<TAB>name) does not show as passed, failed or skipped. */
export function missingSpecs(names: string[], specsTsv: string): string[] {
  const ran = new Set<string>();
  for (const line of specsTsv.split("\n")) {
    const tab = line.indexOf("\t");
    if (tab < 0) continue;
    if (line.slice(0, tab) !== "not-run") ran.add(line.slice(tab + 1));
  }
  return names.filter((n) => !ran.has(n));
}

function main(): number {
  const [command, listPath, specsPath] = process.argv.slice(2);
  if (!listPath || (command !== "focus" && command !== "missing") || (command === "missing" && !specsPath)) {
    throw new Error("usage: tsx scripts/e2e-spec-list.ts focus LIST | missing LIST SPECS_TSV");
  }
  const names = parseSpecList(readFileSync(listPath, "utf8"), listPath);
  if (command === "focus") {
    console.log(focusRegex(names));
    return 0;
  }
  const missing = missingSpecs(names, readFileSync(specsPath!, "utf8"));
  for (const name of missing) console.log(name);
  return missing.length === 0 ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    process.exit(main());
  } catch (err) {
    console.error(`e2e-spec-list: ${(err as Error).message}`);
    process.exit(2);
  }
}
