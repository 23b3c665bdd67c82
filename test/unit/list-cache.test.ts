import t from "tap";
import { ContainerListCache, compileFilters } from "../../src/docker/list-cache.ts";
import type { ContainerSummary } from "../../src/docker/types.ts";

const SCOPE = "io.kubernetes.docker.type";
const summary = (id: string, labels: Record<string, string>): ContainerSummary =>
  ({ Id: id, Names: [`/${id}`], Labels: labels, State: "running" }) as ContainerSummary;

const pod = summary("aaaa1111", { [SCOPE]: "podsandbox" });
const ctrA = summary("bbbb2222", { [SCOPE]: "container", "io.kubernetes.sandbox.id": "aaaa1111", app: "x" });
const ctrB = summary("cccc3333", { [SCOPE]: "container", "io.kubernetes.sandbox.id": "dddd", app: "" });

t.test("filters are evaluated as Docker does, or not at all", async (t) => {
  const all = [pod, ctrA, ctrB];
  const run = (filters: Record<string, string[]>) => {
    const match = compileFilters(filters, SCOPE);
    return match && all.filter(match).map((c) => c.Id);
  };
  t.same(run({ label: [`${SCOPE}=container`] }), ["bbbb2222", "cccc3333"]);
  t.same(run({ label: [`${SCOPE}=container`, "io.kubernetes.sandbox.id=aaaa1111"] }), ["bbbb2222"]);
  t.same(run({ label: [`${SCOPE}=container`, "app"] }), ["bbbb2222", "cccc3333"], "a bare key means the label is present");
  t.same(run({ label: [`${SCOPE}=container`, "app="] }), ["cccc3333"], "key= means the empty value");
  t.same(run({ label: [SCOPE], id: ["2222"] }), ["bbbb2222"], "Docker's id filter matches inside the id");
  t.same(run({ label: [SCOPE], id: ["aaaa", "cccc"] }), ["aaaa1111", "cccc3333"], "several ids: any");
  t.equal(run({ label: ["app=x"] }), undefined, "outside the cache's scope");
  t.equal(run({ label: [SCOPE], status: ["running"] }), undefined, "a filter it does not evaluate");
  t.equal(run({ label: [SCOPE], id: ["not-hex.*"] }), undefined, "an id pattern it would not evaluate like Docker");
});

/** dockerd's containers as a fake scope: whole fetches counted, fetches by id recorded, either held at a gate. */
function fixture(options: { maxPatch?: number } = {}) {
  let calls = 0;
  const byId: string[][] = [];
  let items = [pod, ctrA, ctrB];
  let gate: Promise<void> | undefined;
  const cache = new ContainerListCache({
    scopeLabel: SCOPE,
    fetchScope: async () => {
      calls++;
      const snapshot = items;
      await gate;
      return snapshot;
    },
    fetchIds: async (ids) => {
      byId.push(ids);
      const snapshot = items.filter((c) => ids.includes(c.Id));
      await gate;
      return snapshot;
    },
    ...options,
  });
  return {
    cache,
    calls: () => calls,
    byId,
    set(next: ContainerSummary[]) {
      items = next;
    },
    hold(p: Promise<void>) {
      gate = p;
    },
  };
}

const noIds = async (): Promise<ContainerSummary[]> => {
  throw new Error("no fetch by id expected");
};

const filter = { label: [`${SCOPE}=container`] };

t.test("without the event stream, nothing is cached", async (t) => {
  const f = fixture();
  t.equal(await f.cache.list(filter), undefined);
  t.equal(f.calls(), 0);
});

t.test("while connected, repeated lists cost one fetch until something changes", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  t.equal((await f.cache.list(filter))!.length, 2);
  t.equal((await f.cache.list(filter))!.length, 2);
  t.equal((await f.cache.list({ label: [`${SCOPE}=podsandbox`] }))!.length, 1, "other filters use the same snapshot");
  t.equal(f.calls(), 1);
  f.set([pod, ctrA]);
  f.cache.invalidate(); // an event, or one of cridock's own changes
  t.same((await f.cache.list(filter))!.map((c) => c.Id), ["bbbb2222"], "the change is seen by the next list");
  t.equal(f.calls(), 2);
  f.cache.setConnected(false);
  t.equal(await f.cache.list(filter), undefined, "a dropped stream turns the cache off");
});

t.test("a snapshot invalidated while it was fetched is used once, never kept", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  let release!: () => void;
  f.hold(new Promise<void>((r) => (release = r)));
  const pending = f.cache.list(filter);
  f.cache.invalidate(); // a container changed during the fetch
  release();
  await pending;
  f.hold(Promise.resolve());
  await f.cache.list(filter);
  t.equal(f.calls(), 2, "the next list fetched again");
});

t.test("lists during a fetch share it, unless something changed since it began", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  let release!: () => void;
  f.hold(new Promise<void>((r) => (release = r)));
  const first = [f.cache.list(filter), f.cache.list({ label: [`${SCOPE}=podsandbox`] }), f.cache.list(filter)];
  t.equal(f.calls(), 1, "three lists, one fetch");
  f.set([pod, ctrA]);
  f.cache.invalidate(); // a container went away while the fetch ran
  const after = f.cache.list(filter);
  t.equal(f.calls(), 2, "a list after the change does not take the older fetch");
  release();
  t.same((await Promise.all(first)).map((l) => l!.length), [2, 1, 2], "the first three got the fetch they shared");
  t.same((await after)!.map((c) => c.Id), ["bbbb2222"], "the later list sees the change");
  f.hold(Promise.resolve());
  await f.cache.list(filter);
  t.equal(f.calls(), 2, "the fetch begun after the change became the snapshot");
});

t.test("a failed fetch reaches every list that shared it, and the next list tries again", async (t) => {
  let calls = 0;
  const cache = new ContainerListCache({
    scopeLabel: SCOPE,
    fetchScope: async () => {
      calls++;
      if (calls === 1) throw new Error("dockerd went away");
      return [pod];
    },
    fetchIds: noIds,
  });
  cache.setConnected(true);
  const shared = [cache.list(filter), cache.list(filter)];
  for (const p of shared) await t.rejects(p, /dockerd went away/);
  t.same(await cache.list({ label: [`${SCOPE}=podsandbox`] }), [pod]);
  t.equal(calls, 2);
});

t.test("snapshots expire even without events", async (t) => {
  let calls = 0;
  const cache = new ContainerListCache({ scopeLabel: SCOPE, fetchScope: async () => (calls++, [ctrA]), fetchIds: noIds, maxAgeMs: 20 });
  cache.setConnected(true);
  await cache.list(filter);
  await cache.list(filter);
  t.equal(calls, 1);
  await new Promise((r) => setTimeout(r, 40));
  await cache.list(filter);
  t.equal(calls, 2);
});

t.test("an id lookup that misses goes to dockerd; a hit is served from the snapshot", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  const byId = { label: [SCOPE], id: ["bbbb2222"] };
  t.equal(await f.cache.list(byId), undefined, "no snapshot yet: ask dockerd with the narrow filter");
  t.equal(f.calls(), 0);
  await f.cache.list(filter);
  t.same((await f.cache.list(byId))!.map((c) => c.Id), ["bbbb2222"], "served from the snapshot");
  t.equal(f.calls(), 1);
});

const created = (c: ContainerSummary, at: number): ContainerSummary => ({ ...c, Created: at });
const newer = created(summary("eeee5555", { [SCOPE]: "container", "io.kubernetes.sandbox.id": "aaaa1111" }), 300);

t.test("a change to one container refetches that one alone and patches the snapshot, in Docker's order", async (t) => {
  const f = fixture();
  const [p, a, b] = [created(pod, 100), created(ctrA, 200), created(ctrB, 150)];
  f.set([a, b, p]);
  f.cache.setConnected(true);
  t.equal((await f.cache.list({ label: [SCOPE] }))!.length, 3);
  const exited = { ...a, State: "exited" };
  f.set([newer, exited, p]); // b removed, a exited, a new one created
  for (const id of [a.Id, b.Id, newer.Id]) f.cache.invalidateContainer(id);
  t.same(
    (await f.cache.list({ label: [SCOPE] }))!.map((c) => `${c.Id} ${c.State}`),
    ["eeee5555 running", "bbbb2222 exited", "aaaa1111 running"],
    "gone, changed and new containers as dockerd has them, newest first",
  );
  t.equal(f.calls(), 1, "no whole refetch");
  t.same(f.byId, [[a.Id, b.Id, newer.Id]], "one fetch of the three changed containers");
  await f.cache.list({ label: [SCOPE] });
  t.equal(f.byId.length, 1, "patched, the snapshot serves the next list as it is");
});

/** Each container as "id state", sorted: what a list holds, whatever its order. */
const states = (items: ContainerSummary[] | undefined) => items!.map((c) => `${c.Id} ${c.State}`).sort();

t.test("a container changed again while its patch ran stays stale; lists during a patch share it unless something changed since it began", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  await f.cache.list(filter);
  let release!: () => void;
  f.hold(new Promise<void>((r) => (release = r)));
  f.cache.invalidateContainer(ctrA.Id);
  const shared = [f.cache.list(filter), f.cache.list(filter)];
  t.equal(f.byId.length, 1, "two lists, one patch");
  f.set([pod, { ...ctrA, State: "exited" }, ctrB]);
  f.cache.invalidateContainer(ctrA.Id); // it changed again while the patch ran
  const after = f.cache.list(filter);
  t.equal(f.byId.length, 2, "a list after the change does not take the older patch");
  release();
  t.same((await Promise.all(shared)).map(states), [["bbbb2222 running", "cccc3333 running"], ["bbbb2222 running", "cccc3333 running"]], "the sharers got the patch they waited on");
  t.same(states(await after), ["bbbb2222 exited", "cccc3333 running"], "the later list sees the change");
  f.hold(Promise.resolve());
  t.same(states(await f.cache.list(filter)), ["bbbb2222 exited", "cccc3333 running"], "the older patch, ending first, did not put the older state back");
  t.equal(f.calls(), 1);
});

t.test("a patch ending after the older patch still applies what it fetched; one ending after a newer keeps the newer", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  await f.cache.list(filter);
  let releaseOld!: () => void;
  f.hold(new Promise<void>((r) => (releaseOld = r)));
  f.cache.invalidateContainer(ctrA.Id);
  const old = f.cache.list(filter);
  f.set([pod, { ...ctrA, State: "exited" }, ctrB]);
  f.cache.invalidateContainer(ctrA.Id);
  f.hold(Promise.resolve());
  t.same(states(await f.cache.list(filter)), ["bbbb2222 exited", "cccc3333 running"], "the newer patch");
  releaseOld();
  t.same(states(await old), ["bbbb2222 exited", "cccc3333 running"], "the older one, ending last, answers from the patched snapshot");
  t.same(states(await f.cache.list(filter)), ["bbbb2222 exited", "cccc3333 running"], "and left it as it was");
  t.equal(f.byId.length, 2);
});

t.test("a container changed while the whole scope was fetched: the snapshot is kept, that one stays stale", async (t) => {
  const f = fixture();
  f.cache.setConnected(true);
  let release!: () => void;
  f.hold(new Promise<void>((r) => (release = r)));
  const first = f.cache.list(filter);
  f.set([pod, ctrA]);
  f.cache.invalidateContainer(ctrB.Id);
  const after = f.cache.list(filter);
  t.equal(f.calls(), 2, "a list after a change never shares a fetch begun before it");
  release();
  t.equal((await first)!.length, 2, "the first list got the fetch it waited on");
  t.same((await after)!.map((c) => c.Id), ["bbbb2222"]);
  f.hold(Promise.resolve());
  t.same((await f.cache.list(filter))!.map((c) => c.Id), ["bbbb2222"]);
  t.equal(f.calls(), 2, "kept: no third whole fetch");
});

t.test("past maxPatch stale containers the whole scope is refetched; a discarded snapshot under a patch sends the list to dockerd", async (t) => {
  const f = fixture({ maxPatch: 2 });
  f.cache.setConnected(true);
  for (const id of ["4", "5", "6"]) f.cache.invalidateContainer(id.repeat(64));
  await f.cache.list(filter);
  t.equal(f.byId.length, 0, "changes before any snapshot are not kept: the first list fetched the whole scope");
  for (const id of ["1", "2", "3"]) f.cache.invalidateContainer(id.repeat(64));
  await f.cache.list(filter);
  t.equal(f.calls(), 2, "three stale: the whole scope");
  t.equal(f.byId.length, 0);
  f.cache.invalidateContainer(ctrA.Id);
  let release!: () => void;
  f.hold(new Promise<void>((r) => (release = r)));
  const pending = f.cache.list(filter);
  f.cache.invalidate(); // a create: anything may have changed
  release();
  t.equal(await pending, undefined, "the patch had no snapshot left to patch: dockerd answers");
  f.hold(Promise.resolve());
  t.equal(await f.cache.list({ label: [SCOPE], id: [ctrA.Id] }), undefined, "an id lookup without a snapshot goes to dockerd");
  t.equal((await f.cache.list(filter))!.length, 2);
  t.equal(f.calls(), 3);
});

t.test("a failed patch reaches the list, and the next list patches again", async (t) => {
  let failing = true;
  let patches = 0;
  const cache = new ContainerListCache({
    scopeLabel: SCOPE,
    fetchScope: async () => [pod, ctrA],
    fetchIds: async () => {
      patches++;
      if (failing) throw new Error("dockerd went away");
      return [];
    },
  });
  cache.setConnected(true);
  await cache.list(filter);
  cache.invalidateContainer(ctrA.Id);
  await t.rejects(cache.list(filter), /dockerd went away/);
  failing = false;
  t.same(await cache.list(filter), [], "the container is gone");
  t.equal(patches, 2);
});

t.test("overlapping fetches: one ending after a newer fetch or patch never puts its older data back", async (t) => {
  // Each fetch waits on a gate of its own, released in the order a test chooses.
  let items = [pod, ctrA, ctrB];
  const gates: (() => void)[] = [];
  const held = <T>(value: T) => new Promise<T>((resolve) => gates.push(() => resolve(value)));
  const cache = new ContainerListCache({ scopeLabel: SCOPE, fetchScope: () => held(items), fetchIds: (ids) => held(items.filter((c) => ids.includes(c.Id))) });
  cache.setConnected(true);

  // Two whole fetches: the first begun before a container stopped, the second after; the second ends first.
  const older = cache.list(filter);
  items = [pod, { ...ctrA, State: "exited" }, ctrB];
  cache.invalidateContainer(ctrA.Id);
  const newer = cache.list(filter);
  t.equal(gates.length, 2, "the list after the change did not share the fetch begun before it");
  gates[1]!();
  t.same(states(await newer), ["bbbb2222 exited", "cccc3333 running"]);
  gates[0]!();
  t.same(states(await older), ["bbbb2222 running", "cccc3333 running"], "the older list got the fetch it waited on");
  t.same(states(await cache.list(filter)), ["bbbb2222 exited", "cccc3333 running"], "and the snapshot kept the newer");
  t.equal(gates.length, 2, "served from the snapshot");

  // A patch under way when the snapshot ages out: the whole fetch after it begins later and ends first; the patch, ending last, changes nothing.
  await new Promise((r) => setTimeout(r, 0));
  items = [pod, ctrA, { ...ctrB, State: "exited" }];
  cache.invalidateContainer(ctrB.Id);
  const patching = cache.list(filter);
  t.equal(gates.length, 3, "a patch of the one changed");
  (cache as unknown as { snapshot: { at: number } }).snapshot.at -= 60_000; // aged out
  items = [pod, ctrA, { ...ctrB, State: "running" }];
  cache.invalidateContainer(ctrB.Id);
  const whole = cache.list(filter);
  t.equal(gates.length, 4, "a whole fetch");
  gates[3]!();
  t.same(states(await whole), ["bbbb2222 running", "cccc3333 running"]);
  gates[2]!();
  await patching;
  t.same(states(await cache.list(filter)), ["bbbb2222 running", "cccc3333 running"], "the patch begun before the whole fetch did not put its data in");
  t.equal(gates.length, 4, "served from the snapshot");
});
