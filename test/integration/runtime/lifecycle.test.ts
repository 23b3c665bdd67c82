// Process lifecycle: graceful stop removes the socket, a signal while
// starting stops it gracefully once started, a second instance on a live
// socket refuses to start, a stale socket is replaced, bad flags exit 2.
import t from "tap";
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess, REPO_ROOT } from "../../helpers/cridock-process.ts";
import { pipeToDocker } from "../../helpers/docker-request-counter.ts";
import { TEST_DOCKER_ENDPOINT } from "../../helpers/env.ts";

const CLI = join(REPO_ROOT, "bin/cridock.js");

t.test("SIGTERM stops serving, removes the socket and exits 0", async (t) => {
  const cridock = await startCridockProcess({ flags: ["--network-plugin=no-op"] });
  t.ok(existsSync(cridock.socketPath));
  await cridock.client.call("Version", {});
  t.equal(await cridock.stop(), 0);
  t.notOk(existsSync(cridock.socketPath), "the socket is gone");
});

t.test("SIGTERM while starting: cridock finishes starting, then stops gracefully", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-int-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // dockerd behind a proxy that holds every connection until released:
  // cridock's start waits on Docker there (recovery lists containers), so
  // the signal lands mid-start, deterministically.
  const held: Socket[] = [];
  let released = false;
  const proxy = createServer((client) => (released ? pipeToDocker(client) : held.push(client)));
  const proxyPath = join(dir, "docker.sock");
  await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve));
  t.teardown(() => proxy.close());
  const socketPath = join(dir, "cri.sock");
  const child = spawn(process.execPath, [CLI, `--container-runtime-endpoint=unix://${socketPath}`, `--root-directory=${dir}/root`, `--docker-endpoint=unix://${proxyPath}`, "--network-plugin=no-op"], { stdio: "ignore" });
  const exited = new Promise<[number | null, string | null]>((resolve) => child.once("exit", (code, signal) => resolve([code, signal])));
  t.teardown(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"));
  for (let i = 0; i < 600 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(held.length > 0, "cridock's start is waiting on Docker");
  child.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 500));
  t.same([child.exitCode, child.signalCode], [null, null], "the signal did not end it mid-start");
  released = true;
  held.splice(0).forEach((client) => pipeToDocker(client));
  t.same(await exited, [0, null], "it started, then stopped gracefully (exit 0)");
  t.notOk(existsSync(socketPath), "the socket is gone");
});

t.test("a dockerd slow to answer the start's reconciliation: the socket serves anyway, Status says why it is not ready, pod calls wait", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-int-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // Docker's container lists (the start's sweep, recovery and log resume all
  // list) are held until released; its version, info and events answer.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let heldLists = 0;
  const isList = (chunk: Buffer) => /^GET \/v[\d.]+\/containers\/json[? ]/.test(chunk.toString("latin1", 0, 64));
  const proxy = createServer((client) =>
    pipeToDocker(client, {
      holdFrom: (chunk) => {
        if (!isList(chunk)) return undefined;
        heldLists++;
        return released;
      },
    }),
  );
  const proxyPath = join(dir, "docker.sock");
  await new Promise<void>((resolve) => proxy.listen(proxyPath, resolve));
  t.teardown(() => {
    release();
    proxy.close();
  });
  const started = Date.now();
  const cridock = await startCridockProcess({ flags: ["--network-plugin=no-op", `--docker-endpoint=unix://${proxyPath}`], startTimeoutMs: 60_000 });
  t.teardown(() => cridock.kill());
  const servedAfter = Date.now() - started;
  t.ok(heldLists > 0, "the start's list was held");
  t.ok(servedAfter < 30_000, `the socket served ${servedAfter} ms after the start, lists still unanswered`);

  const version = await cridock.client.call("Version", {}, { timeoutMs: 10_000 });
  t.equal(version.runtimeName, "docker", "Version answers");
  const status = await cridock.client.call("Status", {}, { timeoutMs: 10_000 });
  const runtime = status.status.conditions.find((c: { type: string }) => c.type === "RuntimeReady");
  t.equal(runtime.status, false, "RuntimeReady is false while the start reconciles");
  t.equal(runtime.reason, "RuntimeStarting");
  t.match(runtime.message, /reconciling the previous run's pods with dockerd \(step [a-z.]+, \d+ s so far\)/);

  const early = await cridock.client.call("ListPodSandbox", {}, { timeoutMs: 1_000 }).then(
    () => undefined,
    (err: { code?: number }) => err,
  );
  t.equal(early?.code, 4, "a pod call waits for the reconciliation, up to its own deadline (DEADLINE_EXCEEDED)");
  t.match(cridock.logs(), /serving before the start's reconciliation with dockerd is done/);

  const listed = cridock.client.call("ListPodSandbox", {}, { timeoutMs: 60_000 });
  await new Promise((r) => setTimeout(r, 300));
  release();
  t.ok(await listed, "the waiting call is answered once dockerd answers the start's lists");
  const ready = await cridock.client.call("Status", {}, { timeoutMs: 10_000 });
  t.equal(ready.status.conditions.find((c: { type: string }) => c.type === "RuntimeReady").status, true, "then the runtime is ready");
  t.match(cridock.logs(), /start steps/, "the start's steps are logged once it is through");
  t.equal(await cridock.stop(), 0);
});

t.test("a second instance on a live socket fails with a clear message", async (t) => {
  const first = await startCridockProcess({ flags: ["--network-plugin=no-op"] });
  t.teardown(() => first.stop());
  const second = spawnSync(process.execPath, [CLI, `--container-runtime-endpoint=unix://${first.socketPath}`, `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`, "--network-plugin=no-op"], {
    encoding: "utf8",
    timeout: 30_000,
  });
  t.equal(second.status, 1);
  t.match(second.stderr, /another process is already serving on/);
  t.same(await first.client.call("Version", {}).then((v) => v.version), "0.1.0", "the first instance still serves");
});

t.test("a stale socket left by a killed instance is replaced", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-stale-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, "cri.sock");
  const killed = await startCridockProcess({ socketPath, rootDirectory: join(dir, "root"), flags: ["--network-plugin=no-op"] });
  await killed.kill();
  t.ok(existsSync(socketPath), "kill -9 leaves the socket file behind");
  const next = await startCridockProcess({ socketPath, rootDirectory: join(dir, "root"), flags: ["--network-plugin=no-op"] });
  t.equal((await next.client.call("Version", {})).version, "0.1.0");
  t.equal(await next.stop(), 0);
});

t.test("bad flags exit 2 naming the flag", async (t) => {
  const res = spawnSync(process.execPath, [CLI, "--log-level=chatty"], { encoding: "utf8", timeout: 30_000 });
  t.equal(res.status, 2);
  t.match(res.stderr, /--log-level/);
  const unknown = spawnSync(process.execPath, [CLI, "--frobnicate"], { encoding: "utf8", timeout: 30_000 });
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /frobnicate/);
});

t.test("--version and --help answer without starting", async (t) => {
  const version = spawnSync(process.execPath, [CLI, "--version"], { encoding: "utf8", timeout: 30_000 });
  t.equal(version.status, 0);
  t.match(version.stdout, /^cridock \d+\.\d+\.\d+/);
  const help = spawnSync(process.execPath, [CLI, "--help"], { encoding: "utf8", timeout: 30_000 });
  t.equal(help.status, 0);
  t.match(help.stdout, /--container-runtime-endpoint/);
});

t.test("SIGINT also stops gracefully", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-int-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, "cri.sock");
  const child = spawn(process.execPath, [CLI, `--container-runtime-endpoint=unix://${socketPath}`, `--root-directory=${dir}/root`, `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`, "--network-plugin=no-op"], { stdio: "ignore" });
  for (let i = 0; i < 200 && !existsSync(socketPath); i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(existsSync(socketPath), "serving");
  child.kill("SIGINT");
  const code = await new Promise((resolve) => child.once("exit", resolve));
  t.equal(code, 0);
  t.notOk(existsSync(socketPath));
});
