/**
 * A fixed list of e2e specs (scripts/k8s/spec-list.ts) for
 * scripts/k8s-conformance.sh and scripts/test.sh:
 *
 *   focus LIST                  prints the ginkgo --focus regex of the listed specs
 *   count LIST REPORT.json OUT  writes the run's counts against the list as JSON
 *                               ({passed, failed, skipped, failures}, what
 *                               scripts/suite/summary.ts --counts reads)
 *                               and prints them in one line
 *
 * Usage: tsx scripts/k8s/spec-list-command.ts focus LIST | count LIST REPORT.json OUT.json
 */
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { specResults, type SuiteReport } from "./conformance-results.ts";
import { countAgainstList, focusRegex, parseSpecList } from "./spec-list.ts";

function readList(file: string): string[] {
  return parseSpecList(readFileSync(file, "utf8"), file);
}

function readReport(file: string): SuiteReport[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`cannot read the ginkgo report ${file}`, { cause: err });
  }
  if (!Array.isArray(parsed)) throw new Error(`${file} is not a ginkgo JSON report (an array of suite reports)`);
  return parsed as SuiteReport[];
}

function main(argv: string[]): void {
  const [command, list, report, out] = argv;
  if (command === "focus" && list && !report) {
    console.log(focusRegex(readList(list)));
  } else if (command === "count" && list && report && out) {
    const counts = countAgainstList(readList(list), specResults(readReport(report)));
    writeFileSync(out, JSON.stringify(counts) + "\n");
    console.log(`${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped (of the list ${list})`);
  } else {
    throw new Error("usage: tsx scripts/k8s/spec-list-command.ts focus LIST | count LIST REPORT.json OUT.json");
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    console.error(`k8s-spec-list: ${(err as Error).message}`);
    process.exit(1);
  }
}
