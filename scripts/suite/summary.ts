/**
 * Adds up the results of the test suites scripts/test.sh ran: TAP streams
 * of the tap suites and the conformance runner's JSON counts. Prints one
 * line per suite, the failed tests, one line per engine setup (suites named
 * "suite@engine" by scripts/test.sh), and last a line exactly
 * "N passed, N failed" over all of them. Exits 1 if anything failed.
 *
 * With CRIDOCK_RECORD_RESULTS set (scripts/bench/lib/results.ts), the
 * run's timings (--time lines, --run-seconds) and its counts are appended to
 * docs/results/ci-times.jsonl, labelled by CRIDOCK_RESULTS_LABEL ("fresh",
 * "warm"), for the table in docs/testing.md; otherwise nothing is written.
 *
 * Usage: tsx scripts/suite/summary.ts [--tap NAME=FILE]... [--counts NAME=FILE]...
 *          [--exit-status NAME=CODE]... [--failed NAME=REASON]... [--skipped NAME=REASON]...
 *          [--time LINE]... [--run-seconds N] [--command TEXT]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { recordResult } from "../bench/lib/results.ts";
import { countTap, type TapCounts } from "./tap-count.ts";
import { timingRows } from "./timings.ts";

function split(option: string, value: string): [string, string] {
  const eq = value.indexOf("=");
  if (eq <= 0) throw new Error(`--${option} wants NAME=VALUE, got "${value}"`);
  return [value.slice(0, eq), value.slice(eq + 1)];
}

function readCounts(file: string): TapCounts {
  const parsed = JSON.parse(readFileSync(file, "utf8")) as Partial<TapCounts>;
  return {
    passed: parsed.passed ?? 0,
    failed: parsed.failed ?? 0,
    skipped: parsed.skipped ?? 0,
    failures: parsed.failures ?? [],
  };
}

/** "integration@docker29" and "integration@docker29 runner" → "docker29"; no engine in the name → undefined. */
function engineOf(suiteName: string): string | undefined {
  const at = suiteName.lastIndexOf("@");
  return at < 0 ? undefined : suiteName.slice(at + 1).split(" ")[0];
}

function main(): number {
  const { values } = parseArgs({
    options: {
      tap: { type: "string", multiple: true, default: [] },
      counts: { type: "string", multiple: true, default: [] },
      // A suite that could not run at all (its runner crashed) counts as one failure.
      failed: { type: "string", multiple: true, default: [] },
      // A runner that exited non-zero although no test point failed (a crash after the tests, a coverage error).
      "exit-status": { type: "string", multiple: true, default: [] },
      // A suite the run chose not to start (its reason printed): one skip, neither passed nor failed.
      skipped: { type: "string", multiple: true, default: [] },
      // Where the run's time went, one "NAME N s" line each (recorded only when asked).
      time: { type: "string", multiple: true, default: [] },
      "run-seconds": { type: "string" },
      command: { type: "string", default: "bash scripts/test.sh" },
    },
  });
  const suites: [string, TapCounts][] = [];
  for (const v of values.tap!) {
    const [name, file] = split("tap", v);
    suites.push([name, countTap(readFileSync(file, "utf8"))]);
  }
  for (const v of values.counts!) {
    const [name, file] = split("counts", v);
    suites.push([name, readCounts(file)]);
  }
  for (const v of values["exit-status"]!) {
    const [name, code] = split("exit-status", v);
    const suite = suites.find(([n]) => n === name)?.[1];
    if (code === "0" || (suite && suite.failed > 0)) continue;
    suites.push([`${name} runner`, { passed: 0, failed: 1, skipped: 0, failures: [`${name} runner exited with ${code}`] }]);
  }
  for (const v of values.failed!) {
    const [name, reason] = split("failed", v);
    suites.push([name, { passed: 0, failed: 1, skipped: 0, failures: [reason] }]);
  }
  const skipReasons = new Map<string, string>();
  for (const v of values.skipped!) {
    const [name, reason] = split("skipped", v);
    suites.push([name, { passed: 0, failed: 0, skipped: 1, failures: [] }]);
    skipReasons.set(name, reason);
  }
  let passed = 0;
  let failed = 0;
  const engines = new Map<string, TapCounts>();
  for (const [name, counts] of suites) {
    passed += counts.passed;
    failed += counts.failed;
    console.log(`# ${name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
    for (const failure of counts.failures) console.log(`#   FAILED ${failure}`);
    if (skipReasons.has(name)) console.log(`#   SKIPPED ${skipReasons.get(name)}`);
    const engine = engineOf(name);
    if (engine) {
      const total = engines.get(engine) ?? { passed: 0, failed: 0, skipped: 0, failures: [] };
      total.passed += counts.passed;
      total.failed += counts.failed;
      total.skipped += counts.skipped;
      engines.set(engine, total);
    }
  }
  for (const [engine, total] of engines) {
    console.log(`# engine ${engine}: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
  }
  const runSeconds = values["run-seconds"] === undefined ? undefined : Number(values["run-seconds"]);
  if (values.time!.length > 0) {
    // A record that cannot be written costs the record, never the run's verdict below.
    try {
      recordResult("ci-times", {
        command: values.command!,
        columns: ["step", "seconds"],
        rows: timingRows(values.time!, Number.isInteger(runSeconds) ? runSeconds : undefined),
        note: `${passed} passed, ${failed} failed.`,
      });
    } catch (err) {
      console.log(`# the run's timings were not recorded: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

process.exit(main());
