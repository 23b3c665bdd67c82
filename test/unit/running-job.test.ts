/**
 * scripts/env/common.sh's running_job, which the test runner's exit path
 * asks before it stops its background build and VM chain. A pid that is not
 * a running job of the shell must answer no, even while some process has
 * that pid: in an hour-long run the kernel's pids wrap, and CI's run of
 * f076f27 found a stranger under the ended build's pid, stopped "it", and
 * printed a line after the summary, which made the whole run fail.
 */
import t from "tap";
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";

const COMMON = join(import.meta.dirname, "../../scripts/env/common.sh");

/** Runs SCRIPT in bash after sourcing common.sh; its stdout, trimmed. */
function bash(script: string): string {
  const run = spawnSync("bash", ["-c", `set -euo pipefail; source "$0"; ${script}`, COMMON], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`bash exited ${run.status}: ${run.stderr}`);
  return run.stdout.trim();
}

t.test("a background job is running until it ends, then no longer", async (t) => {
  const out = bash(`
    sleep 30 & job=$!
    running_job "$job" && echo while-running=yes || echo while-running=no
    kill "$job"; wait "$job" || true
    running_job "$job" && echo after-end=yes || echo after-end=no`);
  t.same(out.split("\n"), ["while-running=yes", "after-end=no"]);
});

t.test("a live process that is not the shell's job is not taken for one", async (t) => {
  // The stranger: a process alive under its pid, started by someone else (here, this test).
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  t.teardown(() => void child.kill());
  const stranger = String(child.pid);
  t.ok(spawnSync("kill", ["-0", stranger]).status === 0, `the stranger (pid ${stranger}) is alive`);
  t.equal(bash(`running_job ${stranger} && echo yes || echo no`), "no");
  t.equal(bash(`running_job "" && echo yes || echo no`), "no", "nor is an empty pid");
});
