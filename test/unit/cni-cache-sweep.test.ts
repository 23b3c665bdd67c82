/**
 * A cache write interrupted by kill -9 leaves `<entry>.<8 hex>.tmp` in
 * `<cni-cache>/results`; the next start removes it (and nothing else).
 */
import t from "tap";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CniNetwork } from "../../src/network/cni.ts";
import { createLogger } from "../../src/log.ts";

t.test("start sweeps temporaries an interrupted write left, and only those", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-cni-sweep-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const results = join(dir, "cache", "results");
  await mkdir(results, { recursive: true });
  await mkdir(join(dir, "conf"));
  const id = "d".repeat(64);
  const leftover = `net-${id}-eth0.0a1b2c3d.tmp`;
  const keep = [`net-${id}-eth0`, "someone-elses.tmp", `net-${id}-eth0.notours.tmp`];
  for (const name of [leftover, ...keep]) await writeFile(join(results, name), "{}");
  const old = new Date(Date.now() - 3600_000);
  for (const name of [leftover, ...keep]) await utimes(join(results, name), old, old);
  const network = new CniNetwork({ confDir: join(dir, "conf"), binDirs: [join(dir, "bin")], cacheDir: join(dir, "cache"), log: createLogger("silent" as never) });
  await network.start();
  t.teardown(() => network.close());
  t.same((await readdir(results)).sort(), keep.sort(), "the leftover temporary is gone, everything else stays");
});
