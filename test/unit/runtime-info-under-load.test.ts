// Version and Status answer at once, whatever else cridock has asked of
// dockerd. Against a fake dockerd on a unix socket that holds every log
// follow and every stop open (as a real one does for running containers and
// for stops in their grace period), more of them than the quick pool has
// connections must not delay /version or /_ping. This is what kubelet saw as
// "Version from runtime service failed ... context canceled" around pod
// deletions.
import t, { type Test } from "tap";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DockerClient } from "../../src/docker/client.ts";
import { RuntimeStatus } from "../../src/runtime/status.ts";
import { NoopNetwork } from "../../src/network/plugin.ts";
import { createLogger } from "../../src/log.ts";

const HELD = 80;

async function fakeDockerd(socketPath: string) {
  const held: ServerResponse[] = [];
  let versionCalls = 0;
  /** /version asked for under an API version: what RuntimeStatus asks (negotiation asks the bare path). */
  let versionedCalls = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? "";
    if (url === "/_ping") return void res.end("OK");
    if (url.endsWith("/version")) {
      versionCalls++;
      if (/^\/v[0-9.]+\/version/.test(url)) versionedCalls++;
      res.setHeader("content-type", "application/json");
      return void res.end(JSON.stringify({ Version: "99.1.0", ApiVersion: "1.43" }));
    }
    if (url.includes("/events")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.flushHeaders();
      held.push(res);
      return;
    }
    // Log follows and stops: held until the test ends.
    held.push(res);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    get versionCalls() {
      return versionCalls;
    },
    get versionedCalls() {
      return versionedCalls;
    },
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms).unref()),
  ]);
}

/** A fake dockerd on a socket of its own and a DockerClient of it, both gone when T ends. */
async function clientOfFakeDockerd(t: Test) {
  const dir = await mkdtemp(join(tmpdir(), "cridock-fake-dockerd-"));
  const socketPath = join(dir, "docker.sock");
  const dockerd = await fakeDockerd(socketPath);
  const docker = new DockerClient({ endpoint: `unix://${socketPath}`, requestTimeoutMs: 120_000, logger: createLogger("silent") });
  t.teardown(async () => {
    await dockerd.close();
    await docker.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  return { dockerd, docker };
}

t.test("Version and Status do not queue behind long-held Docker requests", async (t) => {
  const { dockerd, docker } = await clientOfFakeDockerd(t);
  docker.watchContainerEvents();
  const status = new RuntimeStatus(docker, new NoopNetwork());
  t.equal(await within(2000, "Version before load", status.runtimeVersion()), "99.1.0");

  const abort = new AbortController();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < HELD / 2; i++) {
    const id = i.toString(16).padStart(64, "0");
    pending.push(docker.raw("GET", `/containers/${id}/logs`, { query: { follow: true }, timeoutMs: 0, signal: abort.signal }).catch(() => undefined));
    pending.push(docker.stopContainer(id, 30).catch(() => undefined));
  }
  t.teardown(() => abort.abort());
  await new Promise((r) => setTimeout(r, 300));

  const started = performance.now();
  t.equal(await within(1000, "Version under load", status.runtimeVersion()), "99.1.0", "Version answers");
  const conditions = await within(1000, "Status under load", status.conditions());
  t.equal(conditions.find((c) => c.type === "RuntimeReady")?.status, true, "Status answers RuntimeReady");
  t.ok(performance.now() - started < 1000, "both within a second");
  t.ok(await within(1000, "an inspect under load", docker.ping()), "quick requests still get a connection");
  const before = dockerd.versionCalls;
  for (let i = 0; i < 20; i++) await status.runtimeVersion();
  t.equal(dockerd.versionCalls, before, "repeated Version calls are answered from memory while the event stream is up");
});

t.test("dockerd's version is read when the event stream connects, before any Version call", async (t) => {
  const { dockerd, docker } = await clientOfFakeDockerd(t);
  const status = new RuntimeStatus(docker, new NoopNetwork());
  const unsubscribe = status.prefetchOnConnect();
  t.teardown(unsubscribe);
  docker.watchContainerEvents();
  const deadline = Date.now() + 2000;
  while (dockerd.versionedCalls === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.equal(dockerd.versionedCalls, 1, "the version was asked once, on connection");
  t.equal(await within(1000, "Version", status.runtimeVersion()), "99.1.0");
  t.equal(dockerd.versionedCalls, 1, "Version answered from what was prefetched");
});
