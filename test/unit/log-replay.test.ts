/**
 * The json-file follower killed -9 over and over: no record written twice.
 * A "kill" freezes the checkpoint store (a dead process saves nothing more)
 * and abandons the follower; the next one resumes from what is on disk, as
 * a restarted cridock does. Docker's log is a real file laid out as dockerd
 * writes it; only `inspect` is faked.
 */
import t from "tap";
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DockerClient } from "../../src/docker/client.ts";
import { parseRecord } from "../../src/logs/crilog.ts";
import { JsonFileFollower } from "../../src/logs/file-follower.ts";
import { FollowStateStore, type FollowState } from "../../src/logs/resume.ts";
import { createLogger } from "../../src/log.ts";

const log = createLogger("silent" as never);
const ID = "c".repeat(64);

/** A store whose saves stop when the process "dies". */
class KillableStore extends FollowStateStore {
  dead = false;
  override async save(state: FollowState): Promise<void> {
    if (!this.dead) await super.save(state);
  }
}

async function setup(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), "cridock-replay-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dockerLog = join(dir, "c-json.log");
  await writeFile(dockerLog, "");
  const docker = {
    inspectContainer: async () => ({
      LogPath: dockerLog,
      HostConfig: { LogConfig: { Type: "json-file", Config: { "max-file": "3" } } },
      State: { Running: true, Pid: 4_000_000 },
    }),
  } as unknown as DockerClient;
  const criPath = join(dir, "cri.log");
  let n = 0;
  return {
    dir,
    criPath,
    docker,
    async write(count: number) {
      let text = "";
      for (let i = 0; i < count; i++) text += JSON.stringify({ log: `${++n}\n`, stream: "stdout", time: new Date().toISOString() }) + "\n";
      await appendFile(dockerLog, text);
    },
    get written() {
      return n;
    },
  };
}

async function numbers(path: string): Promise<number[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text.split("\n").slice(0, -1).map((l) => Number(parseRecord(l)?.content));
}

async function until(fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

function follower(env: Awaited<ReturnType<typeof setup>>, store: FollowStateStore): JsonFileFollower {
  return new JsonFileFollower({ docker: env.docker, store, logger: log, containerId: ID, logPath: env.criPath, tty: false });
}

/** Abandons a follower as kill -9 would: what it saves from now on is lost. */
async function kill(store: KillableStore, f: JsonFileFollower): Promise<void> {
  store.dead = true;
  await f.stop();
}

t.test("kill -9 soon after each resume of an idle container: nothing is written twice", async (t) => {
  const env = await setup(t);
  await env.write(1000);
  let store = new KillableStore(join(env.dir, "state"));
  let f = follower(env, store);
  await f.startFresh();
  await until(async () => (await numbers(env.criPath)).length === 1000);
  await kill(store, f); // the checkpoint on disk is the one from before the first record
  for (let restart = 0; restart < 5; restart++) {
    store = new KillableStore(join(env.dir, "state"));
    const saved = await store.load(ID);
    f = follower(env, store);
    await f.resume(saved!);
    // Idle container; killed after its checkpoints had time to happen.
    await new Promise((r) => setTimeout(r, restart % 2 === 0 ? 50 : 700));
    await kill(store, f);
  }
  store = new KillableStore(join(env.dir, "state"));
  f = follower(env, store);
  await f.resume((await store.load(ID))!);
  await env.write(10);
  await until(async () => (await numbers(env.criPath)).length >= 1010);
  await new Promise((r) => setTimeout(r, 300));
  const got = await numbers(env.criPath);
  t.equal(got.length, 1010, "1010 records for 1010 lines");
  t.ok(got.every((x, i) => x === i + 1), "every number once, in order");
  await f.stop();
});

t.test("the checkpoint catches up with the file once the container goes quiet", async (t) => {
  const env = await setup(t);
  const store = new KillableStore(join(env.dir, "state"));
  const f = follower(env, store);
  await f.startFresh();
  await env.write(100);
  await until(async () => (await numbers(env.criPath)).length === 100);
  await new Promise((r) => setTimeout(r, 1200));
  const saved = await store.load(ID);
  t.equal(saved?.offset, (await stat(env.criPath)).size, "the checkpoint covers every record written");
  await f.stop();
});
