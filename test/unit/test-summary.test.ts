/**
 * The counting behind scripts/test.sh's closing line: a failure anywhere in
 * a suite must show up in "N passed, N failed", whether it is an assertion,
 * a crashed test file or a critest spec.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { countTap } from "../../scripts/suite/tap-count.ts";
import { countJunit, countSummaryLine, passedSpecs } from "../conformance/junit.ts";

const TAP_RUN = `TAP version 14
# Subtest: test/unit/a.test.ts
    # Subtest: group
        ok 1 - one
        not ok 2 - two
          ---
          at: x
          ...
        ok 3 - three # SKIP not on this host
        1..3
    not ok 1 - group # time=3ms
    ok 2 - top-level assertion
    1..2
not ok 1 - test/unit/a.test.ts # time=100ms
# Subtest: test/unit/b.test.ts
    ok 1 - fine
    1..1
not ok 2 - test/unit/b.test.ts # exit code 1
# Subtest: test/unit/c.test.ts
    ok 1 - later # TODO not yet
    not ok 2 - known bug # TODO fix it
    1..2
ok 3 - test/unit/c.test.ts
1..3
`;

t.test("TAP: assertions are counted once, at any depth", async (t) => {
  const counts = countTap(TAP_RUN);
  t.equal(counts.passed, 3, "one, top-level assertion, fine");
  t.equal(counts.skipped, 1);
  t.ok(counts.failures.includes("two"), "the failed assertion is named");
});

t.test("TAP: a file that fails outside its assertions is one failure", async (t) => {
  const counts = countTap(TAP_RUN);
  t.equal(counts.failed, 2, "'two', and b.test.ts's exit code; not the parents of 'two' again");
  t.match(counts.failures.join("\n"), /b\.test\.ts # exit code 1/);
});

t.test("TAP: TODO points count neither way", async (t) => {
  const counts = countTap("ok 1 - a # TODO\nnot ok 2 - b # todo later\nok 3 - c\n1..3\n");
  t.same([counts.passed, counts.failed], [1, 0]);
});

t.test("TAP: an empty stream counts nothing", async (t) => {
  t.same(countTap(""), { passed: 0, failed: 0, skipped: 0, failures: [] });
});

const JUNIT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="3" errors="0" failures="1" time="0.1">
  <testsuite name="CRI validation" package="/tmp" tests="5" disabled="0" skipped="3" errors="0" failures="1" time="0.1">
    <testcase name="[BeforeSuite]" classname="CRI validation" status="passed" time="0.01"></testcase>
    <testcase name="[It] [k8s.io] Runtime info runtime should return version info [Conformance]" classname="CRI validation" status="passed" time="0.001"></testcase>
    <testcase name="[It] [k8s.io] Runtime info runtime should return runtime conditions [Conformance]" classname="CRI validation" status="failed" time="0.001"><failure message="x">y</failure></testcase>
    <testcase name="[It] [k8s.io] PodSandbox &quot;x&quot;" classname="CRI validation" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[It] [k8s.io] Streaming" classname="CRI validation" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`;

t.test("JUnit: specs by status; the suite setup node is not a spec", async (t) => {
  const counts = countJunit(JUNIT);
  t.same([counts.passed, counts.failed, counts.skipped], [1, 1, 2]);
  t.same(counts.failures, ["[It] [k8s.io] Runtime info runtime should return runtime conditions [Conformance]"]);
});

t.test("JUnit: the names of the specs that passed, without the suite setup node", async (t) => {
  t.same(passedSpecs(JUNIT), ["[It] [k8s.io] Runtime info runtime should return version info [Conformance]"]);
});

t.test("JUnit: a failed suite setup is a failure", async (t) => {
  const counts = countJunit(`<testcase name="[BeforeSuite]" status="failed"></testcase>`);
  t.equal(counts.failed, 1);
});

t.test("Ginkgo's closing line is the fallback", async (t) => {
  const counts = countSummaryLine("Ran 2 of 122 Specs in 0.09 seconds\nFAIL! -- 1 Passed | 1 Failed | 0 Pending | 120 Skipped\n");
  t.same(counts && [counts.passed, counts.failed, counts.skipped], [1, 1, 120]);
  t.equal(countSummaryLine("panic: nil map"), null);
});

t.test("the summary adds up each engine setup and closes with the total over all", async (t) => {
  const { execFileSync } = await import("node:child_process");
  const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(join(tmpdir(), "cridock-summary-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const counts = (name: string, passed: number, failed: number, skipped: number) => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({ passed, failed, skipped, failures: failed ? [`${name} broke`] : [] }));
    return ["--counts", `${name}=${file}`];
  };
  const args = [
    ...counts("conformance@docker29", 80, 0, 10),
    ...counts("integration@docker29", 300, 0, 1),
    ...counts("conformance@docker20.10", 70, 1, 20),
  ];
  let out = "";
  try {
    execFileSync("node_modules/.bin/tsx", ["scripts/suite/summary.ts", ...args], { encoding: "utf8" });
    t.fail("a failed suite makes the summary exit non-zero");
  } catch (err) {
    out = (err as { stdout: string }).stdout;
  }
  const lines = out.trim().split("\n");
  t.ok(lines.includes("# engine docker29: 380 passed, 0 failed, 11 skipped"));
  t.ok(lines.includes("# engine docker20.10: 70 passed, 1 failed, 20 skipped"));
  t.equal(lines.at(-1), "450 passed, 1 failed", "the closing line counts every engine");
});

t.test("the closing line: a suite not started is a skip with its reason, a failed one a failure", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-summary-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const counts = join(dir, "c.json");
  await writeFile(counts, JSON.stringify({ passed: 3, failed: 0, skipped: 1, failures: [] }));
  const summary = (...args: string[]) =>
    promisify(execFile)(process.execPath, ["--import=tsx", "scripts/suite/summary.ts", ...args]).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
    );
  const skipped = await summary("--counts", `a@e1=${counts}`, "--skipped", "vm-kubeadm@e1=not started: too slow");
  t.equal(skipped.code, 0, "a skip fails nothing");
  t.match(skipped.stdout, /^# vm-kubeadm@e1: 0 passed, 0 failed, 1 skipped\n#   SKIPPED not started: too slow$/m);
  t.match(skipped.stdout, /^# engine e1: 3 passed, 0 failed, 2 skipped$/m);
  t.match(skipped.stdout, /\n3 passed, 0 failed\n$/, "the closing line counts passes and failures only");
  const failed = await summary("--counts", `a@e1=${counts}`, "--failed", "vm@e1=the boot failed");
  t.equal(failed.code, 1);
  t.match(failed.stdout, /\n3 passed, 1 failed\n$/);
});

t.test("the run's timings are recorded only when CRIDOCK_RECORD_RESULTS asks, and the closing line stays last", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-summary-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const counts = join(dir, "c.json");
  await writeFile(counts, JSON.stringify({ passed: 2, failed: 0, skipped: 0, failures: [] }));
  const args = ["--import=tsx", "scripts/suite/summary.ts", "--counts", `unit@e1=${counts}`, "--time", "setup 13 s", "--time", "unit@e1 191 s", "--run-seconds", "204"];
  const { CRIDOCK_RECORD_RESULTS: _, ...env } = process.env;
  const unasked = await promisify(execFile)(process.execPath, args, { env });
  t.match(unasked.stdout, /\n2 passed, 0 failed\n$/);
  const records = join(dir, "results");
  const asked = await promisify(execFile)(process.execPath, args, { env: { ...env, CRIDOCK_RECORD_RESULTS: records, CRIDOCK_RESULTS_LABEL: "warm" } });
  t.match(asked.stdout, /\n2 passed, 0 failed\n$/, "the closing line is still the last");
  const [line, ...rest] = (await readFile(join(records, "ci-times.jsonl"), "utf8")).trim().split("\n");
  t.equal(rest.length, 0, "one run, one line");
  const run = JSON.parse(line!) as { label: string; rows: unknown[][]; note: string };
  t.equal(run.label, "warm");
  t.same(run.rows, [["setup", 13], ["unit@e1", 191], ["whole run", 204]]);
  t.equal(run.note, "2 passed, 0 failed.");
});
