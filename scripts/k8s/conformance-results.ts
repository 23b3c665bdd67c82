/**
 * Turns the ginkgo JSON report of one Kubernetes e2e suite run
 * (scripts/k8s-conformance.sh) into per-spec lists beside it:
 *
 *   specs.tsv     state<TAB>full spec name, every spec of the suite
 *   passed.txt    one full spec name a line
 *   failed.txt    name, then the failure's first line and location, indented
 *   skipped.txt   specs that ran and skipped themselves (e2eskipper), with the reason
 *
 * and prints one line of counts. Specs outside the focus (ginkgo's "skipped"
 * with no failure message and no run time) are counted as not run, apart
 * from those that skipped themselves.
 *
 * Usage: tsx scripts/k8s/conformance-results.ts REPORT.json OUT_DIR
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** The fields of ginkgo v2's types.SpecReport this reads. */
export interface SpecReport {
  ContainerHierarchyTexts?: string[] | null;
  LeafNodeText?: string;
  LeafNodeType?: string;
  State?: string;
  RunTime?: number;
  Failure?: { Message?: string; Location?: { FileName?: string; LineNumber?: number } };
}

export interface SuiteReport {
  SuiteDescription?: string;
  SpecReports?: SpecReport[] | null;
}

export type SpecOutcome = "passed" | "failed" | "skipped" | "not-run";

export interface SpecResult {
  name: string;
  outcome: SpecOutcome;
  /** For failed and skipped specs: the first line of the message, and where. */
  detail: string;
}

const FAILED_STATES = new Set(["failed", "panicked", "interrupted", "aborted", "timedout"]);

/** One spec's outcome. Only "It" nodes are specs; suite-level nodes fail the run but are reported apart. */
export function classify(spec: SpecReport): SpecOutcome {
  const state = spec.State ?? "";
  if (state === "passed") return "passed";
  if (FAILED_STATES.has(state)) return "failed";
  if (state === "skipped") return spec.Failure?.Message || (spec.RunTime ?? 0) > 0 ? "skipped" : "not-run";
  return "not-run";
}

function firstLine(text: string | undefined): string {
  return (text ?? "").split("\n").find((line) => line.trim() !== "")?.trim() ?? "";
}

export function specResults(reports: SuiteReport[]): SpecResult[] {
  const results: SpecResult[] = [];
  for (const suite of reports) {
    for (const spec of suite.SpecReports ?? []) {
      const isSpec = spec.LeafNodeType === "It";
      const name = [...(spec.ContainerHierarchyTexts ?? []), spec.LeafNodeText ?? ""].filter((t) => t !== "").join(" ");
      const outcome = classify(spec);
      if (!isSpec && outcome !== "failed") continue;
      const where = spec.Failure?.Location?.FileName ? ` (${spec.Failure.Location.FileName}:${spec.Failure.Location.LineNumber ?? 0})` : "";
      results.push({
        name: isSpec ? name : `[${spec.LeafNodeType}] ${name || suite.SuiteDescription || "suite"}`,
        outcome,
        detail: outcome === "failed" || outcome === "skipped" ? `${firstLine(spec.Failure?.Message)}${where}` : "",
      });
    }
  }
  return results;
}

export function countOutcomes(results: SpecResult[]): Record<SpecOutcome, number> {
  const counts: Record<SpecOutcome, number> = { passed: 0, failed: 0, skipped: 0, "not-run": 0 };
  for (const r of results) counts[r.outcome]++;
  return counts;
}

function main(): void {
  const [reportPath, outDir] = process.argv.slice(2);
  if (!reportPath || !outDir) throw new Error("usage: tsx scripts/k8s/conformance-results.ts REPORT.json OUT_DIR");
  let reports: SuiteReport[];
  try {
    reports = JSON.parse(readFileSync(reportPath, "utf8")) as SuiteReport[];
  } catch (err) {
    throw new Error(`cannot read the ginkgo report ${reportPath}`, { cause: err });
  }
  if (!Array.isArray(reports)) throw new Error(`${reportPath} is not a ginkgo JSON report (an array of suite reports)`);
  const results = specResults(reports).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const lines = (outcome: SpecOutcome, withDetail: boolean) =>
    results
      .filter((r) => r.outcome === outcome)
      .map((r) => (withDetail && r.detail ? `${r.name}\n    ${r.detail}` : r.name))
      .join("\n");
  writeFileSync(join(outDir, "specs.tsv"), results.map((r) => `${r.outcome}\t${r.name}`).join("\n") + "\n");
  writeFileSync(join(outDir, "passed.txt"), lines("passed", false) + "\n");
  writeFileSync(join(outDir, "failed.txt"), lines("failed", true) + "\n");
  writeFileSync(join(outDir, "skipped.txt"), lines("skipped", true) + "\n");
  const c = countOutcomes(results);
  console.log(`${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped, ${c["not-run"]} not run (outside the focus)`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    main();
  } catch (err) {
    console.error(`conformance-results: ${(err as Error).message}`);
    process.exit(1);
  }
}
