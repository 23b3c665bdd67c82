// The start's gate (src/cri/startup-gate.ts): while the start still
// reconciles with dockerd, pod calls wait for it (each up to its own
// deadline), Version, Status, RuntimeConfig and UpdateRuntimeConfig answer,
// and Status reports RuntimeReady false with the step in progress.
import t from "tap";
import { StartupGate, UNGATED_METHODS } from "../../src/cri/startup-gate.ts";
import type { CallContext, HandlerTable, StreamHandler, UnaryHandler } from "../../src/cri/handlers.ts";
import { runtimeInfoRpcs } from "../../src/cri/runtime-info-rpcs.ts";
import type { Condition, RuntimeStatus } from "../../src/runtime/status.ts";
import { CridockError, deadlineExceeded } from "../../src/errors.ts";

const ctx = (signal = new AbortController().signal): CallContext => ({ method: "test", signal });
const tick = () => new Promise((r) => setImmediate(r));

function table(calls: string[]): HandlerTable {
  const unary = (name: string): UnaryHandler => async () => {
    calls.push(name);
    return { name };
  };
  const stream: StreamHandler = async (_req, _ctx, send) => {
    calls.push("GetContainerEvents");
    await send({ event: 1 });
  };
  return { Version: unary("Version"), Status: unary("Status"), ListPodSandbox: unary("ListPodSandbox"), GetContainerEvents: stream };
}

t.test("closed: ungated calls answer, gated ones wait until it opens", async (t) => {
  const gate = new StartupGate("recovery");
  const calls: string[] = [];
  const guarded = gate.guard(table(calls));
  t.same(await (guarded.Version as UnaryHandler)({}, ctx()), { name: "Version" });
  t.same(await (guarded.Status as UnaryHandler)({}, ctx()), { name: "Status" });
  const listed = (guarded.ListPodSandbox as UnaryHandler)({}, ctx());
  const sent: unknown[] = [];
  const streamed = (guarded.GetContainerEvents as StreamHandler)({}, ctx(), async (m) => void sent.push(m));
  await tick();
  t.same(calls, ["Version", "Status"], "the pod calls have not run");
  gate.open();
  t.same(await listed, { name: "ListPodSandbox" });
  await streamed;
  t.same(sent, [{ event: 1 }], "a stream handler's send passes through");
  t.same(calls, ["Version", "Status", "ListPodSandbox", "GetContainerEvents"]);
  t.equal(gate.notReady(), undefined, "open: nothing to report");
});

t.test("a call whose deadline passes first ends DEADLINE_EXCEEDED, naming the step", async (t) => {
  let now = 1_000_000;
  const gate = new StartupGate("scratch.sweep", () => now);
  gate.step("logs.resume");
  now += 42_000;
  const ac = new AbortController();
  const guarded = gate.guard(table([]));
  const waiting = (guarded.ListPodSandbox as UnaryHandler)({}, ctx(ac.signal));
  // What the server's context gives the signal when the client's deadline passes (cri/server.ts).
  ac.abort(deadlineExceeded("ListPodSandbox: the client's deadline passed"));
  const err = await waiting.catch((e: unknown) => e);
  t.ok(err instanceof CridockError);
  t.equal((err as CridockError).code, "DEADLINE_EXCEEDED", "the deadline's own code, not UNAVAILABLE, whichever timer the client sees first");
  t.match((err as CridockError).message, /the call ended before cridock was ready: .*step logs\.resume, 42 s so far.*the client's deadline passed/);
  const aborted = new AbortController();
  aborted.abort(deadlineExceeded("ListPodSandbox: the client's deadline passed"));
  await t.rejects((guarded.ListPodSandbox as UnaryHandler)({}, ctx(aborted.signal)), { code: "DEADLINE_EXCEEDED" }, "already past: at once");
});

t.test("a cancelled call ends CANCELLED; an abort with no reason of cridock's, UNAVAILABLE", async (t) => {
  const gate = new StartupGate("recovery");
  const guarded = gate.guard(table([]));
  const cancelled = new AbortController();
  const waiting = (guarded.ListPodSandbox as UnaryHandler)({}, ctx(cancelled.signal));
  cancelled.abort(new CridockError("CANCELLED", "ListPodSandbox: cancelled by the client"));
  await t.rejects(waiting, { code: "CANCELLED", message: /before cridock was ready/ });
  const bare = new AbortController();
  const other = (guarded.ListPodSandbox as UnaryHandler)({}, ctx(bare.signal));
  bare.abort();
  await t.rejects(other, { code: "UNAVAILABLE", message: /the call ended before cridock was ready/ });
});

t.test("a failed start: waiting calls end UNAVAILABLE with the cause, and Status says so", async (t) => {
  const gate = new StartupGate("recovery");
  const guarded = gate.guard(table([]));
  const waiting = (guarded.ListPodSandbox as UnaryHandler)({}, ctx());
  gate.fail(new Error("checkpoint directory unreadable"));
  await t.rejects(waiting, { code: "UNAVAILABLE", message: /cridock's start failed: checkpoint directory unreadable/ });
  t.same(gate.notReady()?.reason, "RuntimeStartFailed");
  gate.open();
  t.notOk(gate.isOpen, "a failed gate stays failed");
});

t.test("the ungated set is what kubelet asks before it syncs pods", async (t) => {
  t.same([...UNGATED_METHODS].sort(), ["RuntimeConfig", "Status", "UpdateRuntimeConfig", "Version"]);
});

t.test("Status: RuntimeReady false while starting; dockerd's own unreadiness is kept", async (t) => {
  let dockerUp = true;
  const status = {
    conditions: async (): Promise<Condition[]> => [
      dockerUp
        ? { type: "RuntimeReady", status: true, reason: "", message: "" }
        : { type: "RuntimeReady", status: false, reason: "DockerDaemonNotReady", message: "dockerd does not answer" },
      { type: "NetworkReady", status: true, reason: "", message: "" },
    ],
    runtimeHandlers: async () => [{ name: "", recursiveReadOnlyMounts: false, userNamespaces: false }],
    runtimeFeatures: async () => ({ mountOptions: false }),
  } as unknown as RuntimeStatus;
  const gate = new StartupGate("recovery");
  const rpcs = runtimeInfoRpcs({ status, verboseInfo: () => ({}), starting: () => gate.notReady() });
  const statusCall = rpcs.Status as UnaryHandler;
  const runtimeCondition = async () => (await statusCall({}, ctx())).status.conditions.find((c: Condition) => c.type === "RuntimeReady");

  t.match(await runtimeCondition(), { status: false, reason: "RuntimeStarting", message: /step recovery/ });
  t.same((await statusCall({}, ctx())).runtimeHandlers, [], "no handlers announced while not ready");
  dockerUp = false;
  t.match(await runtimeCondition(), { status: false, reason: "DockerDaemonNotReady" }, "dockerd down is the more useful reason");
  dockerUp = true;
  gate.open();
  t.match(await runtimeCondition(), { status: true, reason: "" });
});
