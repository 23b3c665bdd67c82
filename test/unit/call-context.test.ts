/**
 * The context each CRI call's handler gets (src/cri/call-context.ts): its
 * signal aborts with CANCELLED or DEADLINE_EXCEEDED while the call is under
 * way, is aborted before the handler starts when the call is already over,
 * and never aborts after the call was answered. The call is a stand-in
 * EventEmitter with grpc-js's `cancelled` and `getDeadline()`; the server's
 * wiring to grpc-js is tested in cri-server-calls.test.ts.
 */
import t from "tap";
import { EventEmitter } from "node:events";
import { callContext, type ServerCallLike } from "../../src/cri/call-context.ts";
import { CridockError } from "../../src/errors.ts";

const METHOD = "/runtime.v1.ImageService/PullImage";

class FakeCall extends EventEmitter implements ServerCallLike {
  cancelled = false;
  constructor(private readonly deadline: Date | number = Infinity) {
    super();
  }
  getDeadline(): Date | number {
    return this.deadline;
  }
  cancel(): void {
    this.cancelled = true;
    this.emit("cancelled");
  }
}

const codeOf = (signal: AbortSignal) => (signal.reason instanceof CridockError ? signal.reason.code : undefined);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test("no deadline, not cancelled: the signal stays open and there is no deadline", async (t) => {
  const { ctx, done } = callContext(METHOD, new FakeCall());
  t.equal(ctx.signal.aborted, false);
  t.equal(ctx.deadline, undefined);
  t.equal(ctx.method, METHOD);
  done();
});

t.test("a deadline already passed when the handler starts: the signal is aborted at once", async (t) => {
  const now = Date.now();
  const { ctx, done } = callContext(METHOD, new FakeCall(new Date(now - 1)), () => now);
  t.equal(ctx.signal.aborted, true, "aborted before any await");
  t.equal(codeOf(ctx.signal), "DEADLINE_EXCEEDED");
  t.match(String((ctx.signal.reason as Error).message), /PullImage: the client's deadline passed/);
  t.same(ctx.deadline, new Date(now - 1));
  done();
});

t.test("a deadline that is exactly now counts as passed", async (t) => {
  const now = Date.now();
  const { ctx, done } = callContext(METHOD, new FakeCall(now), () => now);
  t.equal(codeOf(ctx.signal), "DEADLINE_EXCEEDED");
  done();
});

t.test("a call the client cancelled before the handler starts: the signal is aborted at once", async (t) => {
  const call = new FakeCall(Date.now() + 60_000);
  call.cancelled = true;
  const { ctx, done } = callContext(METHOD, call);
  t.equal(ctx.signal.aborted, true);
  t.equal(codeOf(ctx.signal), "CANCELLED");
  done();
});

t.test("a deadline in the future aborts the signal when it passes, not before", async (t) => {
  const { ctx, done } = callContext(METHOD, new FakeCall(new Date(Date.now() + 80)));
  t.equal(ctx.signal.aborted, false);
  await sleep(20);
  t.equal(ctx.signal.aborted, false, "still open before the deadline");
  await sleep(150);
  t.equal(codeOf(ctx.signal), "DEADLINE_EXCEEDED");
  done();
});

t.test("a cancel while the call runs aborts with CANCELLED; the deadline after it changes nothing", async (t) => {
  const call = new FakeCall(Date.now() + 60);
  const { ctx, done } = callContext(METHOD, call);
  call.cancel();
  t.equal(codeOf(ctx.signal), "CANCELLED");
  await sleep(120);
  t.equal(codeOf(ctx.signal), "CANCELLED", "the reason is the first one");
  done();
});

t.test("after done(), neither grpc-js's closing 'cancelled' nor the deadline aborts the signal", async (t) => {
  const call = new FakeCall(Date.now() + 40);
  const { ctx, done } = callContext(METHOD, call);
  done();
  call.cancel();
  await sleep(100);
  t.equal(ctx.signal.aborted, false);
});
