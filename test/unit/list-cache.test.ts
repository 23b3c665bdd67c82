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

function fixture() {
  let calls = 0;
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
  });
  return {
    cache,
    calls: () => calls,
    set(next: ContainerSummary[]) {
      items = next;
    },
    hold(p: Promise<void>) {
      gate = p;
    },
  };
}

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
  });
  cache.setConnected(true);
  const shared = [cache.list(filter), cache.list(filter)];
  for (const p of shared) await t.rejects(p, /dockerd went away/);
  t.same(await cache.list({ label: [`${SCOPE}=podsandbox`] }), [pod]);
  t.equal(calls, 2);
});

t.test("snapshots expire even without events", async (t) => {
  let calls = 0;
  const cache = new ContainerListCache({ scopeLabel: SCOPE, fetchScope: async () => (calls++, [ctrA]), maxAgeMs: 20 });
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
