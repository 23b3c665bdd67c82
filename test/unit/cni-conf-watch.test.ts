/**
 * The CNI config is reloaded when its directory changes, not on a timer: a
 * node whose network is up rereads nothing while nothing changes, and a new
 * or changed config is in use at once.
 */
import t from "tap";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CniNetwork } from "../../src/network/cni.ts";
import { createLogger } from "../../src/log.ts";

const log = createLogger("silent" as never);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), "cridock-confwatch-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const bin = join(dir, "bin");
  const conf = join(dir, "conf");
  await mkdir(bin);
  for (const name of ["bridge", "loopback"]) {
    await writeFile(join(bin, name), "#!/bin/sh\n");
    await chmod(join(bin, name), 0o755);
  }
  const write = (file: string, name: string) =>
    writeFile(join(conf, file), JSON.stringify({ name, cniVersion: "1.0.0", plugins: [{ type: "bridge" }] }));
  return { dir, bin, conf, write };
}

/** A started CniNetwork whose reloads are counted. */
async function network(t: { teardown(fn: () => unknown): void }, s: Awaited<ReturnType<typeof setup>>) {
  const net = new CniNetwork({ confDir: s.conf, binDirs: [s.bin], cacheDir: join(s.dir, "cache"), log });
  const counter = { reloads: 0 };
  const reload = net.reload.bind(net);
  net.reload = async () => {
    counter.reloads++;
    await reload();
  };
  await net.start();
  t.teardown(() => net.close());
  return { net, counter };
}

t.test("with a valid config loaded, nothing is reread while nothing changes; a change is loaded at once", async (t) => {
  const s = await setup(t);
  await mkdir(s.conf);
  await s.write("10-a.conflist", "first");
  const { net, counter } = await network(t, s);
  t.equal(net.config()?.name, "first");
  counter.reloads = 0;
  await sleep(2500);
  t.equal(counter.reloads, 0, "no reload in 2.5 s of quiet");
  await s.write("05-b.conflist", "second");
  const start = Date.now();
  while (net.config()?.name !== "second" && Date.now() - start < 1000) await sleep(10);
  t.equal(net.config()?.name, "second", `the new config is in use after ${Date.now() - start} ms`);
  t.ok(Date.now() - start < 1000);
});

t.test("a conf dir that does not exist yet is picked up once it appears, and watched from then on", async (t) => {
  const s = await setup(t);
  const { net } = await network(t, s);
  t.equal(net.readiness().ready, false);
  await mkdir(s.conf);
  await s.write("10-a.conflist", "late");
  const start = Date.now();
  while (!net.readiness().ready && Date.now() - start < 5000) await sleep(20);
  t.equal(net.config()?.name, "late", "loaded by the retry while not ready");
  await s.write("01-b.conflist", "later");
  const again = Date.now();
  while (net.config()?.name !== "later" && Date.now() - again < 1000) await sleep(10);
  t.equal(net.config()?.name, "later", "then changes arrive through the watch");
});
