// A log position file that cannot be read (a power loss in the middle of
// its write, or a damaged disk) is set aside in logs/corrupt/ with a
// warning naming the container, never silently deleted, and cridock's
// start goes on.
import t from "tap";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { DockerClient } from "../../src/docker/client.ts";
import { createLogger } from "../../src/log.ts";
import { LogFollowers } from "../../src/logs/followers.ts";
import { SET_ASIDE_DIR as CORRUPT_DIR } from "../../src/set-aside.ts";

const ID = "d".repeat(64);

t.test("an unreadable log position is set aside with a warning", async (t) => {
  const root = await mkdtemp(join(tmpdir(), "cridock-logstate-"));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, "logs"));
  await writeFile(join(root, "logs", `${ID}.json`), '{"containerId":"ddd');
  let logged = "";
  const stream = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  const docker = { events: { subscribe: () => () => undefined, onConnection: () => () => undefined } } as unknown as DockerClient;
  const followers = new LogFollowers(docker, root, createLogger("info", stream));
  t.equal(await followers.resumeAll(), 0, "nothing resumed from it");
  t.same(await readdir(join(root, "logs")), [CORRUPT_DIR], "no position file left in place");
  const aside = await readdir(join(root, "logs", CORRUPT_DIR));
  t.match(aside, [new RegExp(`^${ID}\\.json\\.`)], "kept in corrupt/, named after the container");
  const warning = logged
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { level: string; containerId?: string; msg: string })
    .find((l) => l.level === "warn");
  t.equal(warning?.containerId, ID, "a warning names the container");
  t.match(warning?.msg, /no longer copied to its CRI log/, "and says what it costs");
});
