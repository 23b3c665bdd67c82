/**
 * The CallContext a handler gets for one gRPC call: a signal aborted when the
 * client cancels the call or its deadline passes, and the deadline itself.
 *
 * A call can be over before its handler starts: the client cancelled while
 * the request was decoded or queued behind other work, or its deadline (1 ms
 * is a value clients send) passed meanwhile. Such a call gets a signal that
 * is already aborted, so a handler that checks its signal before its first
 * Docker request makes none; a timer of 0 ms would fire only after the
 * handler had run to its first await, by when a pull or a create is on the
 * wire.
 */
import { CridockError, deadlineExceeded } from "../errors.ts";
import type { CallContext } from "./handlers.ts";

/** What of a grpc-js server call the context reads. */
export interface ServerCallLike {
  /** True once the client has cancelled (grpc-js sets it before it emits "cancelled"). */
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
