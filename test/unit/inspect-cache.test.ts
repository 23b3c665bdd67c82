import t from "tap";
import { ContainerInspectCache } from "../../src/docker/inspect-cache.ts";
import type { ContainerInspect } from "../../src/docker/types.ts";

const ID_A = "a".repeat(64);
const ID_B = "b".repeat(64);

/** A cache over a fake dockerd whose answers carry a serial number, with a gate to hold a fetch open. */
function fixture(options: { maxAgeMs?: number } = {}) {
  let fetches = 0;
  let gate: Promise<void> | undefined;
  const cache = new ContainerInspectCache({
    maxAgeMs: options.maxAgeMs,
    fetch: async (id) => {
      const serial = ++fetches;
      await gate;
      return { Id: id, State: { Running: true, Pid: serial }, Config: { Labels: { serial: String(serial) } } } as unknown as ContainerInspect;
    },
  });
  return {
    cache,
    fetches: () => fetches,
    hold() {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = undefined;
        release();
      };
    },
  };
}

t.test("without the event stream every inspect asks dockerd", async (t) => {
  const f = fixture();
  await f.cache.inspect(ID_A);
  await f.cache.inspect(ID_A);
  t.equal(f.fetches(), 2);
});

t.test("while connected an unchanged container is inspected once, and its answer is frozen", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  const first = await f.cache.inspect(ID_A);
  const second = await f.cache.inspect(ID_A);
  t.equal(f.fetches(), 1);
  t.equal(second, first, "the same answer");
  t.ok(Object.isFrozen(first) && Object.isFrozen(first.State) && Object.isFrozen(first.Config.Labels), "frozen to its leaves");
  await f.cache.inspect(ID_B);
  t.equal(f.fetches(), 2, "another container is its own entry");
});

t.test("an event for a container drops its entry only", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  await f.cache.inspect(ID_A);
  await f.cache.inspect(ID_B);
  f.cache.invalidate(ID_A);
  t.equal((await f.cache.inspect(ID_A)).State.Pid, 3, "A is fetched again");
  t.equal((await f.cache.inspect(ID_B)).State.Pid, 2, "B is kept");
  f.cache.invalidateAll();
  t.equal((await f.cache.inspect(ID_B)).State.Pid, 4, "invalidateAll drops B too");
});

t.test("a connection change drops everything, and a lost stream stops the caching", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  await f.cache.inspect(ID_A);
  f.cache.setConnected(false);
  await f.cache.inspect(ID_A);
  await f.cache.inspect(ID_A);
  t.equal(f.fetches(), 3);
  f.cache.setConnected(true);
  await f.cache.inspect(ID_A);
  t.equal(f.fetches(), 4, "the reconnect did not bring back the old entry");
});

t.test("an answer fetched across a change is returned but not kept", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  const release = f.hold();
  const pending = f.cache.inspect(ID_A);
  f.cache.invalidate(ID_B); // any change while the fetch is open: the answer may predate it
  release();
  t.equal((await pending).State.Pid, 1);
  t.equal((await f.cache.inspect(ID_A)).State.Pid, 2, "fetched again");
  t.equal((await f.cache.inspect(ID_A)).State.Pid, 2, "and this one kept");
});

t.test("concurrent inspects share one fetch unless a change came between them", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  let release = f.hold();
  const [a, b] = [f.cache.inspect(ID_A), f.cache.inspect(ID_A)];
  release();
  t.equal(await a, await b);
  t.equal(f.fetches(), 1);
  f.cache.invalidate(ID_A);
  release = f.hold();
  const c = f.cache.inspect(ID_A);
  f.cache.invalidate(ID_A);
  const d = f.cache.inspect(ID_A);
  release();
  t.not(await d, await c, "the inspect after the change did not join the fetch from before it");
  t.equal(f.fetches(), 3);
});

t.test("an entry older than maxAgeMs is fetched again", async (t) => {
  const f = fixture({ maxAgeMs: 20 });
  f.cache.setConnected(true);
  await f.cache.inspect(ID_A);
  await new Promise((resolve) => setTimeout(resolve, 40));
  await f.cache.inspect(ID_A);
  t.equal(f.fetches(), 2);
});

t.test("a failed fetch is not kept", async (t) => {
  let fail = true;
  const cache = new ContainerInspectCache({
    fetch: async (id) => {
      if (fail) throw new Error("no such container");
      return { Id: id } as ContainerInspect;
    },
  });
  cache.setConnected(true);
  await t.rejects(cache.inspect(ID_A), /no such container/);
  fail = false;
  t.equal((await cache.inspect(ID_A)).Id, ID_A);
});
