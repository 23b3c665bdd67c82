/**
 * A fixed list of ginkgo specs, named in full (container texts and leaf
 * text joined by spaces, as ginkgo's --focus matches them and as
 * scripts/k8s/conformance-results.ts names them): the focus regex that runs
 * exactly those specs, and the counts of one run against the list, where a
 * listed spec that did not run (renamed upstream, or the suite died before
 * it) is a failure, never silently nothing.
 */
import type { SpecResult } from "./conformance-results.ts";
import type { TapCounts } from "../suite/tap-count.ts";

/** The spec names of a list file: one a line; blank lines and lines starting with # are ignored. */
export function parseSpecList(text: string, source: string): string[] {
  const names: string[] = [];
  const seen = new Set<string>();
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    if (seen.has(line)) throw new Error(`${source}:${index + 1}: "${line}" is listed twice`);
    seen.add(line);
    names.push(line);
  });
  if (names.length === 0) throw new Error(`${source} lists no spec`);
  return names;
}

/** Go RE2's metacharacters, escaped so a spec name matches only itself. */
function escapeRegex(text: string): string {
  return text.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");
}

/**
 * One regex matching the full text of each listed spec, and nothing else.
 * ginkgo matches --focus against the suite's description, a space and the
 * spec's text ("E2eNode Suite [sig-node] Pods ..."), so a name is anchored
 * at its end and at a space or the start before it.
 */
export function focusRegex(names: readonly string[]): string {
  return names.map((name) => `(?:^| )${escapeRegex(name)}$`).join("|");
}

/**
 * Counts a run against its list. Passed, failed and skipped (a spec that ran
 * and skipped itself) are as the run says; a listed spec absent from the run
 * or not run fails; a spec that ran but is not listed fails too (the focus
 * matched more than the list: the list and the regex disagree).
 */
export function countAgainstList(names: readonly string[], results: readonly SpecResult[]): TapCounts {
  const counts: TapCounts = { passed: 0, failed: 0, skipped: 0, failures: [] };
  const byName = new Map(results.map((r) => [r.name, r]));
  const listed = new Set(names);
  for (const name of names) {
    const result = byName.get(name);
    const outcome = result?.outcome ?? "not-run";
    if (outcome === "passed") counts.passed++;
    else if (outcome === "skipped") counts.skipped++;
    else {
      counts.failed++;
      counts.failures.push(outcome === "failed" ? `${name}: ${result?.detail ?? ""}` : `${name}: did not run`);
    }
  }
  for (const result of results) {
    if (!listed.has(result.name) && result.outcome !== "not-run") {
      counts.failed++;
      const detail = result.detail ? `: ${result.detail}` : "";
      counts.failures.push(`${result.name}: ${result.outcome} outside the list${detail}`);
    }
  }
  return counts;
}
