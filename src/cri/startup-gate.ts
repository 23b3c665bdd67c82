/**
 * The calls that must wait for the start's reconciliation with Docker.
 *
 * A start reconciles what the last run left (sandbox recovery, log writers,
 * pods adopted from cri-dockerd) before it can answer for pods, and each of
 * those steps asks dockerd. A dockerd that is slow to answer (restoring its
 * own containers at boot, a starved node) held the whole start, socket
 * included, for as long as it took: past systemd's start timeout, which
 * killed cridock and started it again into the same wait.
 *
 * So the socket serves once the reconciliation is done or after a bounded
 * wait, whichever comes first. Until the gate opens, the calls that read or
 * change pods wait for it, each for as long as its own deadline allows,
 * while Version, Status, RuntimeConfig and UpdateRuntimeConfig answer at once
 * and Status reports the runtime not ready and why: that is what kubelet
 * waits on before it syncs pods.
 */
import { CridockError, describeCause } from "../errors.ts";
import type { CallContext, HandlerTable, StreamHandler, UnaryHandler } from "./handlers.ts";

/** Answered while the gate is closed: identity, readiness and the pod CIDR carry no pod state. */
export const UNGATED_METHODS: ReadonlySet<string> = new Set(["Version", "Status", "RuntimeConfig", "UpdateRuntimeConfig"]);

export type GateState = { phase: "closed"; step: string; since: number } | { phase: "open" } | { phase: "failed"; error: unknown };

export class StartupGate {
  private state: GateState;
  private readonly settled: Promise<void>;
  private settle!: (error?: unknown) => void;

  constructor(firstStep: string, private readonly now: () => number = Date.now) {
    this.state = { phase: "closed", step: firstStep, since: now() };
    this.settled = new Promise<void>((resolve) => {
      this.settle = () => resolve();
    });
  }

  get isOpen(): boolean {
    return this.state.phase === "open";
  }

  /** Names the start step in progress, for Status and for the calls that gave up waiting. */
  step(name: string): void {
    if (this.state.phase === "closed") this.state = { ...this.state, step: name };
  }

  open(): void {
    if (this.state.phase !== "closed") return;
    this.state = { phase: "open" };
    this.settle();
  }

  /** The reconciliation failed: the process is going down, and waiting calls are told so. */
  fail(error: unknown): void {
    if (this.state.phase !== "closed") return;
    this.state = { phase: "failed", error };
    this.settle();
  }

  /**
   * Why the runtime is not ready yet, or undefined once the gate is open.
   * A Status condition's reason and message.
   */
  notReady(): { reason: string; message: string } | undefined {
    const s = this.state;
    if (s.phase === "open") return undefined;
    if (s.phase === "failed") return { reason: "RuntimeStartFailed", message: `cridock's start failed: ${describeCause(s.error)}` };
    const seconds = Math.round((this.now() - s.since) / 1000);
    return {
      reason: "RuntimeStarting",
      message: `cridock is reconciling the previous run's pods with dockerd (step ${s.step}, ${seconds} s so far)`,
    };
  }

  /**
   * Resolves when the gate opens; rejects when it failed or `signal` aborted
   * first. A call its client cancelled or whose deadline passed ends with
   * that code (CANCELLED, DEADLINE_EXCEEDED, the reason the server gave the
   * signal), not UNAVAILABLE: a client whose own timer ran late under load
   * would otherwise read the server's answer as "unavailable" and not as
   * its deadline.
   */
  async wait(signal: AbortSignal): Promise<void> {
    if (this.state.phase === "closed") {
      if (signal.aborted) throw this.ended(signal);
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(this.ended(signal));
        signal.addEventListener("abort", onAbort, { once: true });
        void this.settled.then(() => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        });
      });
    }
    if (this.state.phase === "failed") throw this.unavailable();
  }

  /** The table with every handler but the ungated ones waiting for the gate first. */
  guard(table: HandlerTable, ungated: ReadonlySet<string> = UNGATED_METHODS): HandlerTable {
    const guarded: HandlerTable = {};
    for (const [name, handler] of Object.entries(table)) {
      guarded[name] = ungated.has(name) ? handler : this.guardOne(handler);
    }
    return guarded;
  }

  private guardOne(handler: UnaryHandler | StreamHandler): UnaryHandler | StreamHandler {
    // One wrapper for both shapes: a stream handler's third argument passes through.
    // Once open (every call but a start's first few), the handler runs directly: no
    // extra promise on kubelet's every call for the rest of the process's life.
    return ((request: unknown, ctx: CallContext, send?: (message: unknown) => Promise<void>) => {
      const run = () => (handler as StreamHandler)(request, ctx, send as (message: unknown) => Promise<void>);
      return this.isOpen ? run() : this.wait(ctx.signal).then(run);
    }) as UnaryHandler;
  }

  /** The call ended before the gate opened: its own reason's code, UNAVAILABLE when it has none. */
  private ended(signal: AbortSignal): CridockError {
    const code = signal.reason instanceof CridockError ? signal.reason.code : "UNAVAILABLE";
    return new CridockError(code, `the call ended before cridock was ready: ${this.whyNotReady()}`, { cause: signal.reason });
  }

  private unavailable(): CridockError {
    return new CridockError("UNAVAILABLE", `cridock is not ready: ${this.whyNotReady()}`);
  }

  /** notReady()'s message for a call's error. */
  private whyNotReady(): string {
    return this.notReady()?.message ?? "its start failed";
  }
}
