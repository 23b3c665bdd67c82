/**
 * Following Docker's json-file log is event-driven: a quiet container costs
 * no reads and no stats, and writes, rotations and the container's end are
 * still seen at once. File operations are counted by wrapping the fs
 * functions the tail uses (FileHandle.read/stat and fs/promises' stat).
 */
import t from "tap";
import { spawn } from "node:child_process";
import { appendFile, link, mkdtemp, open, rename, rm, writeFile } from "node:fs/promises";
import * as fsPromises from "node:fs/promises";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTheSecond } from "../../src/logs/file-follower.ts";
import { JsonLogTail } from "../../src/logs/json-tail.ts";
import { Doorbell, LogWatch } from "../../src/logs/log-watch.ts";
import { criContents, dockerEntry, followerFixture, silentLog as log, until } from "../helpers/json-log-fixture.ts";

const require = createRequire(import.meta.url);

/** Counts file reads and stats made by this process while `counting` is set. */
const ops = { counting: false, reads: 0, stats: 0 };
async function countFileOperations(): Promise<void> {
  const probe = await open("/proc/self/stat", "r");
  const proto = Object.getPrototypeOf(probe) as { read: (...a: unknown[]) => unknown; stat: (...a: unknown[]) => unknown };
  await probe.close();
  const read = proto.read;
  const fstat = proto.stat;
  proto.read = function (this: unknown, ...a: unknown[]) {
    if (ops.counting) ops.reads++;
    return read.apply(this, a);
  };
  proto.stat = function (this: unknown, ...a: unknown[]) {
    if (ops.counting) ops.stats++;
    return fstat.apply(this, a);
  };
  const promises = require("node:fs/promises") as typeof fsPromises & { stat: (...a: unknown[]) => unknown };
  const stat = promises.stat;
  promises.stat = ((...a: Parameters<typeof stat>) => {
    if (ops.counting) ops.stats++;
    return stat(...a);
  }) as typeof promises.stat;
  syncBuiltinESMExports();
}

/** A started follower with a minute-long safety poll (unless given). */
async function setup(t: { teardown(fn: () => unknown): void }, pid = process.pid, safetyPollMs = { first: 60_000, max: 60_000 }) {
  const s = await followerFixture(t, { pid, safetyPollMs });
  await s.follower.startFresh();
  return s;
}

t.before(countFileOperations);

t.test("a quiet follower reads and stats nothing; a write after the quiet arrives at once", async (t) => {
  const s = await setup(t);
  t.ok(s.follower.watching, "Docker's directory is watched");
  await appendFile(s.dockerLog, dockerEntry("one\n"));
  await until("the first line", async () => (await criContents(s.criPath)).length === 1, 2000);
  // Let the checkpoint after the write land, then count.
  await new Promise((r) => setTimeout(r, 700));
  ops.reads = ops.stats = 0;
  ops.counting = true;
  await new Promise((r) => setTimeout(r, 1500));
  ops.counting = false;
  t.same({ reads: ops.reads, stats: ops.stats }, { reads: 0, stats: 0 }, "no file operation in 1.5 s of quiet");
  await appendFile(s.dockerLog, dockerEntry("two\n"));
  const ms = await until("the line written after the quiet", async () => (await criContents(s.criPath)).length === 2, 1000);
  t.ok(ms < 1000, `arrived after ${ms} ms, with a safety poll of a minute`);
});

t.test("safety polls of a quiet log go through no threadpool; one still finds a write no event announced", async (t) => {
  // Polls every 50 ms (stretched to the next whole second) instead of backing off to minutes.
  const s = await setup(t, process.pid, { first: 50, max: 50 });
  await appendFile(s.dockerLog, dockerEntry("one\n"));
  await until("the first line", async () => (await criContents(s.criPath)).length === 1, 2000);
  // The first poll after the write looks fully (the watch had reported it); it falls on the next whole second.
  await new Promise((r) => setTimeout(r, 1600));
  ops.reads = ops.stats = 0;
  ops.counting = true;
  await new Promise((r) => setTimeout(r, 1000));
  ops.counting = false;
  // Each full look was a read, two stats of the log and one of /proc/<pid>, each a threadpool round.
  t.same({ reads: ops.reads, stats: ops.stats }, { reads: 0, stats: 0 }, "no asynchronous file operation in a second of safety polls");
  t.notOk(s.follower.done, "the container's process is alive: the follower goes on");
  // A write through a hard link in another directory: the watch on Docker's directory never hears of it.
  const elsewhere = await mkdtemp(join(tmpdir(), "cridock-idle-link-"));
  t.teardown(() => rm(elsewhere, { recursive: true, force: true }));
  await link(s.dockerLog, join(elsewhere, "same-file"));
  await appendFile(join(elsewhere, "same-file"), dockerEntry("unannounced\n"));
  // Safety polls end on whole seconds: the next one is at most a second and a poll away.
  await until("the unannounced line", async () => (await criContents(s.criPath)).length === 2, 2500);
  t.same(await criContents(s.criPath), ["one", "unannounced"]);
});

t.test("the safety polls of many quiet followers fall on whole seconds, so they share wakes of the event loop", async (t) => {
  for (const [ms, now] of [[2000, 1000], [2000, 1001], [2000, 1999], [300_000, 123_456]] as const) {
    const d = onTheSecond(ms, now);
    t.ok(d >= ms && d < ms + 1000 && (now + d) % 1000 === 0, `${ms} ms at ${now}: ${d}`);
  }
  const looks: number[] = [];
  const proto = JsonLogTail.prototype as unknown as { unchangedSync: () => boolean };
  const original = proto.unchangedSync;
  proto.unchangedSync = function (this: unknown) {
    looks.push(Date.now());
    return original.call(this);
  };
  t.teardown(() => {
    proto.unchangedSync = original;
  });
  // Ten followers started one after another, each polling every 50 ms of its own.
  for (let i = 0; i < 10; i++) {
    await setup(t, process.pid, { first: 50, max: 50 });
    await new Promise((r) => setTimeout(r, 37));
  }
  looks.length = 0;
  await new Promise((r) => setTimeout(r, 2200));
  const wakes = new Set(looks.map((at) => Math.floor(at / 100)));
  t.ok(looks.length >= 10, `${looks.length} safety looks`);
  t.ok(wakes.size <= 3, `the looks fell in ${wakes.size} tenths of a second`);
});

t.test("a safety poll finds the container's end when no event and no state file told of it", async (t) => {
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  t.teardown(() => child.kill("SIGKILL"));
  const s = await setup(t, child.pid!, { first: 50, max: 50 });
  await new Promise((r) => setTimeout(r, 300));
  t.notOk(s.follower.done);
  s.state.running = false;
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));
  await until("the follower finishing at a safety poll", async () => s.follower.done, 2500);
});

t.test("a rotation after a quiet spell is followed without a poll", async (t) => {
  const s = await setup(t);
  await appendFile(s.dockerLog, dockerEntry("a\n"));
  await until("a", async () => (await criContents(s.criPath)).length === 1, 2000);
  await new Promise((r) => setTimeout(r, 300));
  await appendFile(s.dockerLog, dockerEntry("b\n"));
  await rename(s.dockerLog, `${s.dockerLog}.1`);
  await writeFile(s.dockerLog, dockerEntry("c\n"));
  await until("b and c", async () => (await criContents(s.criPath)).length === 3, 1000);
  t.same(await criContents(s.criPath), ["a", "b", "c"]);
});

t.test("the container's end: Docker's die event, or dockerd rewriting its state file, ends the follower at once", async (t) => {
  const byEvent = await setup(t);
  await appendFile(byEvent.dockerLog, dockerEntry("last"));
  await new Promise((r) => setTimeout(r, 200));
  const before = byEvent.state.inspects;
  byEvent.state.running = false;
  byEvent.follower.checkExit();
  await until("the follower finishing after the die event", async () => byEvent.follower.done, 1000);
  t.ok(byEvent.state.inspects > before, "Docker was asked");
  t.same(await criContents(byEvent.criPath), ["last"], "the unfinished last line is written, ending its line");

  // No event this time: the process ends and dockerd rewrites the container's state file.
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  t.teardown(() => child.kill("SIGKILL"));
  const byState = await setup(t, child.pid!);
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(byState.follower.done);
  byState.state.running = false;
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));
  await writeFile(join(byState.dir, "config.v2.json"), "{}");
  await until("the follower finishing after the state file changed", async () => byState.follower.done, 1000);
});

t.test("once Docker says the container ended, the follower reads what is left and finishes without waiting for more", async (t) => {
  // dockerd marks a container stopped only after its log copier drained the
  // pipes, so nothing can follow: a wait for more output (a quiet period, a
  // round's pause) would only hold ContainerStatus back. Five exits, each
  // with a last line not read yet when Docker reports the end.
  const took: number[] = [];
  for (let i = 0; i < 5; i++) {
    const s = await setup(t);
    await appendFile(s.dockerLog, dockerEntry("first\n"));
    await until("the first line", async () => (await criContents(s.criPath)).length === 1, 2000);
    await appendFile(s.dockerLog, dockerEntry("last\n"));
    s.state.running = false;
    const start = Date.now();
    s.follower.checkExit();
    await until("the follower finishing", async () => s.follower.done, 2000);
    took.push(Date.now() - start);
    t.same(await criContents(s.criPath), ["first", "last"], `exit ${i + 1}: every line is in the file`);
  }
  const median = [...took].sort((a, b) => a - b)[2]!;
  t.ok(median < 100, `done ${median} ms after the end was reported (median of ${took.join(", ")} ms)`);
});

t.test("the doorbell keeps a ring that comes before the wait; a state hint outranks a log change", async (t) => {
  const bell = new Doorbell();
  const signal = new AbortController().signal;
  bell.ring("log");
  t.equal(await bell.wait(10_000, signal), "log");
  t.equal(await bell.wait(5, signal), "timeout");
  bell.ring("log");
  bell.ring("state");
  t.equal(await bell.wait(10_000, signal), "state");
  const pending = bell.wait(10_000, signal);
  bell.ring("log");
  t.equal(await pending, "log");
  const abort = new AbortController();
  const aborted = bell.wait(10_000, abort.signal);
  abort.abort();
  t.equal(await aborted, "aborted");
});

t.test("a directory that cannot be watched leaves the follower to poll", async (t) => {
  const w = LogWatch.open({ logPath: "/nonexistent-cridock-dir/c-json.log", bell: new Doorbell(), logger: log });
  t.notOk(w.available);
  w.close();
});

t.test("a container writing steadily is read in rounds, not once per write", async (t) => {
  const s = await setup(t);
  await appendFile(s.dockerLog, dockerEntry("first\n"));
  await until("the first line", async () => (await criContents(s.criPath)).length === 1, 2000);
  ops.reads = ops.stats = 0;
  ops.counting = true;
  // dockerd writes each line on its own: 150 writes, 10 ms apart.
  const writes = 150;
  for (let i = 0; i < writes; i++) {
    await appendFile(s.dockerLog, dockerEntry(`line ${i}\n`));
    await new Promise((r) => setTimeout(r, 10));
  }
  await until("every line", async () => (await criContents(s.criPath)).length === writes + 1, 3000);
  ops.counting = false;
  t.same((await criContents(s.criPath)).slice(1), Array.from({ length: writes }, (_, i) => `line ${i}`), "every line once, in order");
  // Reading as each write lands took a read per write or two (about 100 here);
  // gathering while output flows takes one per round, whatever the rounds' timing.
  t.ok(ops.reads <= writes / 5, `${ops.reads} reads for ${writes} writes`);
});
