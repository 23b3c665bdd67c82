/**
 * The CallContext a handler gets for one gRPC call: a signal aborted when the
 * client cancels the call or its deadline passes, and the deadline itself.
 *
 * A call's deadline can pass before its handler starts: grpc-js counts it
 * from the request's headers, and runs the handler once the whole message
 * is in, behind whatever else the event loop had to do (1 ms is a deadline
 * clients send). Such a call gets a signal that is already aborted, so a
 * handler that checks its signal before its first Docker request makes
 * none; a timer of 0 ms would fire only after the handler had run to its
 * first await, by when a pull is on the wire.
 *
 * A cancel before the handler starts is ruled out by grpc-js itself, which
 * runs no handler for a call cancelled before its request was complete; the
 * `cancelled` flag is still read, because a listener added after the
 * "cancelled" event would never hear it.
 */
import { CridockError, deadlineExceeded } from "../errors.ts";
import type { CallContext } from "./handlers.ts";

/** What of a grpc-js server call the context reads. */
export interface ServerCallLike {
  /** True once the client has cancelled (grpc-js sets it as it emits "cancelled"). */
  readonly cancelled: boolean;
  getDeadline(): Date | number;
  on(event: "cancelled", listener: () => void): unknown;
}

export interface CallContextHandle {
  ctx: CallContext;
  /** Call once the call is answered: a later "cancelled" or deadline aborts nothing. */
  done(): void;
}

export function callContext(method: string, call: ServerCallLike, now: () => number = Date.now): CallContextHandle {
  const controller = new AbortController();
  const cancelled = () => new CridockError("CANCELLED", `${method}: cancelled by the client`);
  const expired = () => deadlineExceeded(`${method}: the client's deadline passed`);
  // grpc-js reports "cancelled" after every call, also one answered in full: only a
  // call still under way is cancelled (and only then is the error, with its stack, built).
  let finished = false;
  call.on("cancelled", () => {
    if (!finished && !controller.signal.aborted) controller.abort(cancelled());
  });
  const raw = call.getDeadline();
  const deadlineMs = raw instanceof Date ? raw.getTime() : raw;
  const hasDeadline = Number.isFinite(deadlineMs) && deadlineMs > 0;
  let timer: NodeJS.Timeout | undefined;
  if (call.cancelled) {
    controller.abort(cancelled());
  } else if (hasDeadline) {
    const remaining = deadlineMs - now();
    if (remaining <= 0) controller.abort(expired());
    else timer = setTimeout(() => controller.abort(expired()), remaining);
  }
  return {
    ctx: { method, signal: controller.signal, deadline: hasDeadline ? new Date(deadlineMs) : undefined },
    done() {
      finished = true;
      clearTimeout(timer);
    },
  };
}
