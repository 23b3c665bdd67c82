/**
 * The step timer (src/steps.ts): steps are timed also when they fail,
 * repeats are summed and counted, spawned processes counted, sinks see every
 * step and the total, and the debug line is what the benchmarks parse back
 * (scripts/bench/lib/stats.ts).
 */
import t from "tap";
import { Writable } from "node:stream";
import { createLogger } from "../../src/log.ts";
import { StepTimer, addStepSink, timed } from "../../src/steps.ts";
import { spawnedPerOperation, stepBreakdown, stepLines } from "../../scripts/bench/lib/stats.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function capture() {
  let text = "";
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

t.test("steps are timed, summed over repeats and counted; failures are timed too", async (t) => {
  const timer = new StepTimer("RunPodSandbox");
  await timer.time("docker.create", () => sleep(5));
  await timer.time("checkpoint.write", () => sleep(2));
  await timer.time("checkpoint.write", () => sleep(2));
  await t.rejects(timer.time("cni.add.bridge", async () => { await sleep(3); throw new Error("plugin failed"); }, 1), /plugin failed/);
  timer.spawned(2);
  const s = timer.summary();
  t.equal(s.operation, "RunPodSandbox");
  t.ok(s.steps["docker.create"]! >= 4, `docker.create took ${s.steps["docker.create"]} ms`);
  t.ok(s.steps["checkpoint.write"]! >= 3, "repeats are summed");
  t.ok(s.steps["cni.add.bridge"]! >= 2, "the failed step is timed");
  t.same(s.repeats, { "checkpoint.write": 2 });
  t.equal(s.spawned, 3);
  t.ok(s.totalMs >= s.steps["docker.create"]! + s.steps["checkpoint.write"]!, "the total covers the steps");
});

t.test("sinks see each step and the total; removing a sink stops it", async (t) => {
  const seen: [string, string][] = [];
  const remove = addStepSink((op, step, ms) => {
    t.ok(ms >= 0);
    seen.push([op, step]);
  });
  const timer = new StepTimer("ExecSync");
  await timer.time("docker.exec.create", async () => undefined);
  timer.finish(createLogger("silent"));
  remove();
  await timer.time("docker.exec.start", async () => undefined);
  t.same(seen, [["ExecSync", "docker.exec.create"], ["ExecSync", "total"]]);
});

t.test("timed() without a timer just runs the function", async (t) => {
  t.equal(await timed(undefined, "x", async () => 7), 7);
  const timer = new StepTimer("op");
  t.equal(await timed(timer, "x", async () => 8, 1), 8);
  t.equal(timer.summary().spawned, 1);
});

t.test("finish logs one debug line the benchmarks can read back, and nothing above debug", async (t) => {
  const debug = capture();
  const a = new StepTimer("StopPodSandbox");
  await a.time("cni.del.bridge", async () => undefined, 1);
  a.finish(createLogger("debug", debug.stream), { sandboxId: "abc" });
  const b = new StepTimer("StopPodSandbox");
  await b.time("cni.del.bridge", async () => undefined, 1);
  await b.time("docker.stop", async () => undefined);
  b.finish(createLogger("debug", debug.stream));
  const lines = stepLines(debug.text() + "not json steps\"\n");
  t.equal(lines.length, 2);
  t.equal(lines[0]!.operation, "StopPodSandbox");
  t.same(spawnedPerOperation(debug.text()), { StopPodSandbox: 2 });
  const breakdown = stepBreakdown(debug.text()).StopPodSandbox!;
  t.same(Object.keys(breakdown.steps).sort(), ["cni.del.bridge", "docker.stop"]);
  t.equal(breakdown.spawned, 1);

  const info = capture();
  const c = new StepTimer("ExecSync");
  c.finish(createLogger("info", info.stream));
  t.equal(info.text(), "", "nothing is logged at info level");
});

t.test("finish at info level: cridock's start logs its steps where an operator's info level shows them", async (t) => {
  const info = capture();
  const start = new StepTimer("start");
  start.record("modules", 120);
  await start.time("recovery", async () => undefined);
  start.finish(createLogger("info", info.stream), {}, "info");
  const lines = stepLines(info.text());
  t.equal(lines.length, 1, "one line");
  t.equal(lines[0]!.operation, "start");
  t.equal(lines[0]!.steps.modules, 120, "the step recorded before the timer's own start is kept");
  const quiet = capture();
  new StepTimer("start").finish(createLogger("warn", quiet.stream), {}, "info");
  t.equal(quiet.text(), "", "nothing at warn level");
});
