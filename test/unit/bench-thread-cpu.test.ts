/**
 * The benchmarks' CPU by thread (scripts/bench/lib/proc-usage.ts), read
 * from a real Node process's /proc: V8's workers found by their name, and
 * a thread that ends between the two readings still counted, as `ended`,
 * where it used to drop out of the sum.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { threadCpuDelta, threadCpuSample } from "../../scripts/bench/lib/proc-usage.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Waits for "go" on stdin, then runs a worker thread that spins 600 ms of
// CPU and ends, says "done", and idles until killed. The spin counts the
// thread's own CPU time, not the clock's: on a loaded machine (CI's builds
// beside the suites) 600 ms of clock gave the thread 0.33 s of CPU.
const SPIN = "const cpu = () => { const u = process.threadCpuUsage(); return u.user + u.system; }; const end = cpu() + 600000; while (cpu() < end);";
const CHILD = `
const { Worker } = require("node:worker_threads");
process.stdin.once("data", () => {
  const w = new Worker(${JSON.stringify(SPIN)}, { eval: true });
  w.on("exit", () => process.stdout.write("done\\n"));
});
setInterval(() => {}, 1000);
`;

t.test("a worker thread that spun and ended is counted as ended, and the parts sum to the process's total", async (t) => {
  const child = spawn(process.execPath, ["-e", CHILD], { stdio: ["pipe", "pipe", "inherit"] });
  t.teardown(() => void child.kill("SIGKILL"));
  await sleep(500);
  const pid = child.pid!;
  const before = threadCpuSample(pid);
  t.ok(before.threads.get(pid)?.kind === "main", "the main thread is the one whose tid is the pid");
  const workers = [...before.threads.values()].filter((th) => th.kind === "v8Workers").length;
  t.ok(workers >= 1 && workers <= 4, `V8's platform workers found (${workers})`);

  child.stdin.write("go\n");
  await once(child.stdout, "data");
  await sleep(100);
  const after = threadCpuSample(pid);
  const delta = threadCpuDelta(before, after);
  t.ok(delta.ended >= 0.55, `the ended thread's 600 ms of spinning is counted (${delta.ended.toFixed(2)} s ended)`);
  const parts = delta.main + delta.v8Workers + delta.other + delta.ended;
  t.ok(Math.abs(parts - (after.process - before.process)) < 0.011, `the parts (${parts.toFixed(2)} s) make the process's total (${(after.process - before.process).toFixed(2)} s)`);
});

t.test("a process that has gone reads as nothing, not as an error", async (t) => {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await once(child, "exit");
  const sample = threadCpuSample(child.pid!);
  t.equal(sample.threads.size, 0);
  t.equal(sample.process, 0);
});
