import t from "tap";
import { SharedPulls } from "../../../../src/runtime/image/shared-pulls.ts";

/** A pull the test finishes by hand, recording the signal it was given. */
function manualPull() {
  const calls: { signal: AbortSignal; resolve: (id: string) => void; reject: (err: Error) => void }[] = [];
  const pull = (signal: AbortSignal) =>
    new Promise<string>((resolve, reject) => {
      calls.push({ signal, resolve, reject });
      signal.addEventListener("abort", () => reject(new Error("pull aborted")), { once: true });
    });
  return { calls, pull };
}

t.test("concurrent callers of one key share one pull and its result", async (t) => {
  const shared = new SharedPulls<string>();
  const { calls, pull } = manualPull();
  const waits = Array.from({ length: 30 }, () => shared.run("pause:3.10", undefined, pull));
  t.equal(calls.length, 1, "one pull for thirty callers");
  calls[0]!.resolve("sha256:abc");
  t.same(await Promise.all(waits), Array(30).fill("sha256:abc"));
  t.equal(shared.size, 0, "nothing left in flight");
  shared.run("pause:3.10", undefined, pull).catch(() => undefined);
  t.equal(calls.length, 2, "a later caller starts a new pull");
});

t.test("different keys pull separately; a failure reaches every caller of its key", async (t) => {
  const shared = new SharedPulls<string>();
  const { calls, pull } = manualPull();
  const a = [shared.run("a", undefined, pull), shared.run("a", undefined, pull)];
  const b = shared.run("b", undefined, pull);
  t.equal(calls.length, 2);
  calls[0]!.reject(new Error("manifest unknown"));
  calls[1]!.resolve("sha256:b");
  for (const wait of a) await t.rejects(wait, /manifest unknown/);
  t.equal(await b, "sha256:b");
  t.equal(shared.size, 0);
});

t.test("a caller that cancels stops waiting; the pull goes on for the others", async (t) => {
  const shared = new SharedPulls<string>();
  const { calls, pull } = manualPull();
  const cancel = new AbortController();
  const leaving = shared.run("img", cancel.signal, pull);
  const staying = shared.run("img", new AbortController().signal, pull);
  cancel.abort(new Error("RunPodSandbox cancelled"));
  await t.rejects(leaving, /RunPodSandbox cancelled/);
  t.notOk(calls[0]!.signal.aborted, "the pull is not aborted while someone waits");
  calls[0]!.resolve("sha256:1");
  t.equal(await staying, "sha256:1");
});

t.test("the pull is aborted once its last caller cancels, and the next caller starts afresh", async (t) => {
  const shared = new SharedPulls<string>();
  const { calls, pull } = manualPull();
  const one = new AbortController();
  const two = new AbortController();
  const waits = [shared.run("img", one.signal, pull), shared.run("img", two.signal, pull)];
  one.abort(new Error("gone 1"));
  two.abort(new Error("gone 2"));
  await t.rejects(waits[0]!, /gone 1/);
  await t.rejects(waits[1]!, /gone 2/);
  t.ok(calls[0]!.signal.aborted, "nobody waits: the pull is aborted");
  t.equal(shared.size, 0);
  const again = shared.run("img", undefined, pull);
  t.equal(calls.length, 2, "a new pull, not the aborted one");
  calls[1]!.resolve("sha256:2");
  t.equal(await again, "sha256:2");
});

t.test("an already aborted signal is refused before any pull starts", async (t) => {
  const shared = new SharedPulls<string>();
  const { calls, pull } = manualPull();
  const signal = AbortSignal.abort(new Error("too late"));
  t.throws(() => shared.run("img", signal, pull), /too late/);
  t.equal(calls.length, 0);
});
