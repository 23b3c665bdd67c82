/**
 * The Docker client's HTTP parser (undici's llhttp, WebAssembly) stays on
 * V8's baseline code: tiering it up to optimized code took about 35 MB of
 * compiler memory on a background thread right after start, a 100 MB peak
 * of which glibc kept 10 MB or more (src/docker/undici-pool.ts). Here a
 * fake dockerd on a unix socket answers a few hundred requests; the old
 * client raised the process's peak RSS by 38–42 MB within the wait below,
 * this one by 2–5 MB on Node 20. On Node 26 (undici 8) the same requests
 * raise it by 15–16 MB on a quiet machine and up to 22 MB on a loaded one
 * with no tier-up at all (Node's and undici's own buffers), and a tier-up
 * adds its 35 MB or more on top: the bound is 30 MB. The check is on memory,
 * not time: a slow machine can only make the old client look better, never
 * fail the new one.
 */
import t from "tap";
import { createServer } from "node:http";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DockerClient } from "../../src/docker/client.ts";
import { createLogger } from "../../src/log.ts";

async function peakRssMb(): Promise<number> {
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(await readFile("/proc/self/status", "utf8"))![1]) / 1024;
}

t.test("a few hundred Docker requests do not tier up llhttp", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-wasm-"));
  const socketPath = join(dir, "docker.sock");
  const answer = JSON.stringify({ ApiVersion: "1.47", Version: "29.0.0", Containers: Array.from({ length: 50 }, (_, i) => ({ Id: `${i}`.repeat(20) })) });
  const server = createServer((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(answer);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  const docker = new DockerClient({ endpoint: `unix://${socketPath}`, requestTimeoutMs: 10_000, logger: createLogger("error") });
  t.teardown(async () => {
    await docker.close();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  const before = await peakRssMb();
  for (let i = 0; i < 300; i++) await docker.json("GET", "/version");
  // Time for a background recompilation to run, were one started.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const grown = (await peakRssMb()) - before;
  t.ok(grown < 30, `peak RSS grew by ${grown.toFixed(1)} MB (optimizing llhttp took 35 MB or more on top)`);
});
