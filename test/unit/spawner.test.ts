/**
 * Plugins and mount helpers run from a worker thread: the main thread only
 * posts a message, so a burst of pod deletions never holds the event loop in
 * fork and exec. And the results are what a spawn on the main thread gave.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execPlugin } from "../../src/network/invoke.ts";
import { runProcess } from "../../src/network/spawner.ts";

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
