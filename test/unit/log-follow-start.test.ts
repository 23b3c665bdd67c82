/**
 * What a json-file follower's start costs and leaves on disk: the one
 * checkpoint written before StartContainer answers already names Docker's
 * log file (no second checkpoint right after it: each is a new file and a
 * rename); reading starts with a small buffer and takes large steps once
 * output outruns it, without losing or reordering a line; the state store
 * makes its directory once (again if it was removed) and removes what is
 * not there without complaint.
 */
import t from "tap";
import { appendFile, mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FollowStateStore, type FollowState } from "../../src/logs/resume.ts";
import { criContents, dockerEntry, followerFixture, until } from "../helpers/json-log-fixture.ts";


/** Records every checkpoint saved, in order. */
class RecordingStore extends FollowStateStore {
  readonly saved: FollowState[] = [];
  override async save(state: FollowState): Promise<void> {
    this.saved.push(structuredClone(state));
    await super.save(state);
  }
}

function setup(t: { teardown(fn: () => unknown): void }, initialLog = "") {
  return followerFixture<RecordingStore>(t, { initialLog, store: (dir) => new RecordingStore(dir) });
}

t.test("the checkpoint written before a fresh start returns names Docker's log file, and no second one follows at once", async (t) => {
  const s = await setup(t);
  await s.follower.startFresh();
  t.equal(s.store.saved.length, 1, "one checkpoint when startFresh returns");
  t.equal(s.store.saved[0]!.kind, "json-file");
  t.equal(s.store.saved[0]!.source?.dockerLogPath, s.dockerLog, "it names Docker's log file");
  t.equal(s.store.saved[0]!.source?.position.offset, 0, "from its first byte");
  t.equal(s.store.saved[0]!.done, false);
  // Nothing written: the follower waits without checkpointing again.
  await new Promise((r) => setTimeout(r, 300));
  t.equal(s.store.saved.length, 1, "still one checkpoint while the container is quiet");
  const onDisk = JSON.parse(await readFile(join(s.dir, "state", `${"c".repeat(64)}.json`), "utf8")) as FollowState;
  t.equal(onDisk.source?.dockerLogPath, s.dockerLog, "the file on disk holds it");
});

t.test("output larger than the first read buffer, then much larger, arrives whole and in order", async (t) => {
  // 40,000 lines (about 3.4 MB of Docker's JSON) before the start, then 5,000 more while following.
  const before = Array.from({ length: 40_000 }, (_, i) => `before ${i} ${"x".repeat(20)}\n`);
  const s = await setup(t, before.map(dockerEntry).join(""));
  await s.follower.startFresh();
  const after = Array.from({ length: 5_000 }, (_, i) => `after ${i}\n`);
  await appendFile(s.dockerLog, after.map(dockerEntry).join(""));
  const want = [...before, ...after].map((l) => l.slice(0, -1));
  await until("every line in the CRI file", async () => (await criContents(s.criPath)).length >= want.length, 20_000);
  const got = await criContents(s.criPath);
  t.equal(got.length, want.length, "no line lost or doubled");
  t.same(got, want, "every line, in order");
});

t.test("the state store makes its directory again if it was removed, and removing absent states is fine", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-follow-store-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = new FollowStateStore(join(dir, "logs"));
  const state: FollowState = { containerId: "a".repeat(64), logPath: "/x", tty: false, point: { since: 0n, skip: 0, lastNanos: 0n }, inode: 1, offset: 0, done: false };
  await store.save(state);
  await rm(join(dir, "logs"), { recursive: true, force: true });
  await store.save({ ...state, offset: 7 });
  t.equal((await store.load(state.containerId))?.offset, 7, "saved after its directory was removed");
  await store.remove(state.containerId);
  await store.remove(state.containerId);
  await store.remove("b".repeat(64));
  t.same(await readdir(join(dir, "logs")), [], "nothing left, no error for what was not there");
});
