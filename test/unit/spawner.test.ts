/**
 * Plugins and mount helpers run from a worker thread: the main thread only
 * posts a message, so a burst of pod deletions never holds the event loop in
 * fork and exec. And the results are what a spawn on the main thread gave.
 */
import t from "tap";
import type * as Tap from "tap";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execPlugin } from "../../src/network/invoke.ts";
import { runProcess, SpawnerPool } from "../../src/network/spawner.ts";
import { decodeReply, replyError } from "../../src/network/spawn-protocol.ts";
import { markSelfContained } from "../../src/self-command.ts";

async function scratch(t: Tap.Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-spawner-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function script(dir: string, name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test("exit codes, output, stdin, timeouts, cancellation and a missing binary", async (t) => {
  const ok = await runProcess({ command: "sh", args: ["-c", "cat; echo err >&2; exit 3"], stdin: "in", timeoutMs: 5000 });
  t.match(ok, { code: 3, stdout: "in", stderr: "err\n", killedFor: undefined, spawnError: undefined });
  const slow = await runProcess({ command: "sleep", args: ["5"], timeoutMs: 100 });
  t.match(slow, { signal: "SIGKILL", killedFor: /timed out after 100 ms/ });
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 50);
  const cancelled = await runProcess({ command: "sleep", args: ["5"], timeoutMs: 5000, signal: abort.signal });
  t.match(cancelled, { signal: "SIGKILL", killedFor: /cancelled/ });
  const missing = await runProcess({ command: "/nonexistent/plugin", timeoutMs: 5000 });
  t.match(missing.spawnError, { code: "ENOENT" });
  const env = await runProcess({ command: "sh", args: ["-c", "echo $ONLY"], env: { ONLY: "this", PATH: "/usr/bin:/bin" }, timeoutMs: 5000 });
  t.equal(env.stdout, "this\n");
});

t.test("a burst of plugin runs costs the main thread next to nothing", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-spawner-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const plugin = join(dir, "plugin");
  await writeFile(plugin, '#!/bin/sh\ncat >/dev/null\necho \'{"cniVersion":"1.0.0"}\'\n');
  await chmod(plugin, 0o755);
  const run = () => execPlugin("test plugin", { binary: plugin, env: { PATH: "/usr/bin:/bin" }, stdin: "{}", timeoutMs: 30_000 });
  await run(); // the worker is up
  // What a fork costs grows with the parent's memory: give this process some, as cridock has.
  const ballast = Array.from({ length: 100 }, () => Buffer.alloc(1 << 20, 1));
  const burst = 40;
  // The bar: the same burst spawned on the main thread, as before (fork and exec wait there).
  const s0 = performance.now();
  const direct = Array.from({ length: burst }, () => {
    const child = spawn(plugin, [], { stdio: ["pipe", "ignore", "ignore"] });
    child.stdin.on("error", () => undefined);
    child.stdin.end("{}");
    return new Promise((resolve) => child.on("close", resolve));
  });
  const spawnHeldMs = performance.now() - s0;
  await Promise.all(direct);
  const t0 = performance.now();
  const runs = Array.from({ length: burst }, run);
  const heldMs = performance.now() - t0;
  const outputs = await Promise.all(runs);
  t.ok(outputs.every((o) => o.includes("1.0.0")), "every run returned the plugin's output");
  t.ok(heldMs < spawnHeldMs / 4, `starting ${burst} plugin runs held the main thread ${heldMs.toFixed(1)} ms; spawning them there, ${spawnHeldMs.toFixed(1)} ms`);
  t.equal(ballast.length, 100);
});

t.test("the workers' replies are checked before they are believed", async (t) => {
  const ok = { type: "done", id: 3, code: 0, signal: null, stdout: "out", stderr: "" };
  t.same(decodeReply(ok), ok);
  t.same(decodeReply({ ...ok, code: null, signal: "SIGKILL" }), { ...ok, code: null, signal: "SIGKILL" });
  t.same(decodeReply({ type: "started", id: 3, pid: 42 }), { type: "started", id: 3, pid: 42 });
  const failed = decodeReply({ ...ok, code: null, error: { message: "spawn x ENOENT", code: "ENOENT" } });
  t.match(failed.type === "done" && replyError(failed), { message: "spawn x ENOENT", code: "ENOENT" });
  const done = decodeReply(ok);
  t.equal(done.type === "done" && replyError(done), undefined);
  t.throws(() => decodeReply(null), /not a reply/);
  t.throws(() => decodeReply({ ...ok, id: "3" }), /without a run id/);
  t.throws(() => decodeReply({ ...ok, type: "exit" }), /unknown type "exit"/);
  t.throws(() => decodeReply({ type: "started", id: 3, pid: 0 }), /pid 0/);
  t.throws(() => decodeReply({ ...ok, code: "0" }), /exit code/);
  t.throws(() => decodeReply({ ...ok, signal: 9 }), /signal/);
  t.throws(() => decodeReply({ ...ok, stdout: Buffer.from("x") }), /not text/);
  t.throws(() => decodeReply({ ...ok, error: "boom" }), /error "boom"/);
});

for (const kind of ["process", "worker"] as const) {
  t.test(`${kind}: runs spread over the pool, at most its size, and idle workers end`, async (t) => {
    const dir = await scratch(t);
    const slow = await script(dir, "slow", "sleep 0.5; echo done");
    const pool = new SpawnerPool({ kind, size: 2, idleMs: 200 });
    t.teardown(() => pool.close());
    const runs = Array.from({ length: 5 }, () => pool.run({ command: slow, timeoutMs: 10_000 }));
    t.match(pool.stats(), { workers: 2, running: 5 }, "a second worker started while the first had spawns to start, and no third");
    const results = await Promise.all(runs);
    t.ok(results.every((r) => r.code === 0 && r.stdout === "done\n"), "every run reported its own output");
    t.equal(pool.stats().running, 0);
    await new Promise((r) => setTimeout(r, 600));
    t.equal(pool.stats().workers, 0, "idle workers ended");
    // A run after that starts a worker again.
    t.match(await pool.run({ command: slow, timeoutMs: 10_000 }), { code: 0, stdout: "done\n" });
  });

  t.test(`${kind}: runs that do not queue behind a fork share one worker`, async (t) => {
    const pool = new SpawnerPool({ kind, size: 2 });
    t.teardown(() => pool.close());
    const first = pool.run({ command: "sleep", args: ["1"], timeoutMs: 10_000 });
    // Once the first program runs, its worker has nothing left to fork: the next runs go to it too.
    while (pool.stats().unstarted > 0) await new Promise((r) => setTimeout(r, 10));
    t.match(pool.stats(), { workers: 1, running: 1, unstarted: 0 });
    for (let i = 0; i < 3; i++) t.match(await pool.run({ command: "sh", args: ["-c", "echo $0", String(i)], timeoutMs: 10_000 }), { code: 0, stdout: `${i}\n` });
    await first;
    t.equal(pool.stats().peakWorkers, 1, "one worker served them all");
  });


  t.test(`${kind}: a timeout kills the plugin's process`, async (t) => {
    const dir = await scratch(t);
    const pidFile = join(dir, "pid");
    const hanging = await script(dir, "hanging", `echo $$ > ${pidFile}; cat >/dev/null; exec sleep 30`);
    const pool = new SpawnerPool({ kind });
    t.teardown(() => pool.close());
    await pool.run({ command: "true", timeoutMs: 10_000 }); // the worker is up: the timeout below is the plugin's alone
    const r = await pool.run({ command: hanging, stdin: "{}", timeoutMs: 1_000 });
    t.match(r, { code: null, signal: "SIGKILL", killedFor: "timed out after 1000 ms", spawnError: undefined });
    const pid = Number(await readFile(pidFile, "utf8"));
    t.ok(pid > 0 && !alive(pid), `the plugin (pid ${pid}) is gone`);
  });

  t.test(`${kind}: a killed run whose output stays open (a plugin that left a daemon behind) is not waited for`, async (t) => {
    const dir = await scratch(t);
    const pidFile = join(dir, "daemon");
    // The background sleep keeps the plugin's stdout open after the plugin itself is killed.
    const leaky = await script(dir, "leaky", `sleep 5 & echo $! > ${pidFile}; exec sleep 30`);
    const pool = new SpawnerPool({ kind, killGraceMs: 300 });
    t.teardown(async () => {
      await pool.close();
      const daemon = Number(await readFile(pidFile, "utf8").catch(() => "0"));
      if (daemon > 0 && alive(daemon)) process.kill(daemon, "SIGKILL");
    });
    await pool.run({ command: "true", timeoutMs: 10_000 }); // the worker is up: the timeout below is the plugin's alone
    const started = performance.now();
    const r = await pool.run({ command: leaky, timeoutMs: 1_000 });
    const tookMs = performance.now() - started;
    t.ok(tookMs < 3_000, `resolved ${tookMs.toFixed(0)} ms after the start (timeout 1000 ms, grace 300 ms), not when the output closed (5 s)`);
    t.equal(r.killedFor, "timed out after 1000 ms");
    t.match(r.spawnError?.message, /did not report the end of a killed run within 300 ms/);
    t.match(pool.stats(), { workers: 0, running: 0 }, "the worker was replaced");
    t.match(await pool.run({ command: "sh", args: ["-c", "echo again"], timeoutMs: 5_000 }), { code: 0, stdout: "again\n" });
  });
}

t.test("on Node, plugins are forked from a helper process: cridock's own memory is not write-protected by each fork", async (t) => {
  // A fork copies the forking process's page tables and write-protects its private memory, from
  // whichever thread it forks; the next write to each page then faults (counted per thread in /proc).
  const buffer = Buffer.alloc(16 << 20, 1);
  const touch = () => {
    for (let i = 0; i < buffer.length; i += 4096) buffer[i]!++;
  };
  const mainThreadFaults = async () => Number((await readFile(`/proc/self/task/${process.pid}/stat`, "utf8")).split(") ")[1]!.split(" ")[7]);
  const faultsAfterRuns = async (pool: SpawnerPool) => {
    await pool.run({ command: "true", timeoutMs: 10_000 }); // the worker is up
    touch();
    for (let i = 0; i < 3; i++) await pool.run({ command: "true", timeoutMs: 10_000 });
    const before = await mainThreadFaults();
    touch();
    return (await mainThreadFaults()) - before;
  };
  const helper = new SpawnerPool();
  const thread = new SpawnerPool({ kind: "worker" });
  t.teardown(() => Promise.all([helper.close(), thread.close()]));
  const pages = buffer.length / 4096;
  const viaThread = await faultsAfterRuns(thread);
  t.ok(viaThread >= pages / 2, `after forks from a worker thread, writing ${pages} pages faulted ${viaThread} times (the tax this avoids)`);
  const viaHelper = await faultsAfterRuns(helper);
  t.ok(viaHelper < pages / 20, `after forks from the helper process, writing ${pages} pages faulted ${viaHelper} times`);
});

// Last: it switches this process's default for good.
t.test("a pool made when the modules load takes threads once the single executable's entry has said so", async (t) => {
  const pool = new SpawnerPool(); // as the shared pool is, before src/executable.ts runs
  t.teardown(() => pool.close());
  markSelfContained();
  t.match(await pool.run({ command: "sh", args: ["-c", "echo ok"], timeoutMs: 10_000 }), { code: 0, stdout: "ok\n" });
  t.equal(pool.stats().kind, "worker", "process.execPath is cridock there, not a node that runs -e");
});
