/**
 * The caller's deadline or cancel, as the error a pod checkpoint or restore
 * answers with: the server aborts the call's signal with its own
 * DEADLINE_EXCEEDED (cri/server.ts), a cancel with another reason.
 */
import { CridockError, deadlineExceeded } from "../../errors.ts";

/** `during`: what was under way; `outcome`: what the caller finds after. */
export function abortError(signal: AbortSignal, during: string, outcome: string, cause?: unknown): CridockError {
  const reason: unknown = signal.reason;
  if (reason instanceof CridockError && reason.code !== "DEADLINE_EXCEEDED") return new CridockError(reason.code, `${during}: ${reason.message}; ${outcome}`, { cause });
  if (reason instanceof CridockError || (reason instanceof Error && reason.name === "TimeoutError")) {
    return deadlineExceeded(`the deadline passed while ${during}; ${outcome}`, cause);
  }
  return new CridockError("CANCELLED", `cancelled while ${during}; ${outcome}`, { cause });
}
