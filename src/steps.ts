/**
 * Per-operation step timings: where the time of one RunPodSandbox, ExecSync
 * ... goes (Docker calls, CNI plugin execs, netns pinning, checkpoint
 * writes, image checks) and how many processes it spawned. One StepTimer
 * per operation collects its steps; `finish` logs them at debug level as one
 * structured line and hands every step to the registered sinks, so a
 * metrics module can turn them into histograms without the hot paths
 * knowing about it. Timing costs two performance.now() calls per step.
 */
import type { Logger } from "./log.ts";

/** One finished step: `operation` (e.g. "RunPodSandbox"), `step` (e.g. "cni.add.bridge"), milliseconds. */
export type StepSink = (operation: string, step: string, ms: number) => void;

const sinks = new Set<StepSink>();

/** Registers a sink for every finished step (and for each operation's total as step "total"); returns its remover. */
export function addStepSink(sink: StepSink): () => void {
  sinks.add(sink);
  return () => sinks.delete(sink);
}

export interface StepSummary {
  operation: string;
  totalMs: number;
  /** Child processes the operation started (CNI plugins, mount, umount). */
  spawned: number;
  /** Milliseconds per step name, summed over repeats (rounded to 0.01 ms). */
  steps: Record<string, number>;
  /** How often the steps that ran more than once ran. */
  repeats?: Record<string, number>;
}

export class StepTimer {
  private readonly started = performance.now();
  private readonly times = new Map<string, number>();
  private readonly counts = new Map<string, number>();
  private spawnCount = 0;

  constructor(readonly operation: string) {}

  /** Runs `fn` as step `name`; `spawns` = the processes it starts. Failed steps are timed too. */
  async time<T>(name: string, fn: () => Promise<T>, spawns = 0): Promise<T> {
    const t0 = performance.now();
    this.spawnCount += spawns;
    try {
      return await fn();
    } finally {
      this.record(name, performance.now() - t0);
    }
  }

  /** Adds a step measured elsewhere. */
  record(name: string, ms: number): void {
    this.times.set(name, (this.times.get(name) ?? 0) + ms);
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
    for (const sink of sinks) sink(this.operation, name, ms);
  }

  /** Counts processes started outside `time`. */
  spawned(count = 1): void {
    this.spawnCount += count;
  }

  summary(): StepSummary {
    const steps: Record<string, number> = {};
    for (const [name, ms] of this.times) steps[name] = Math.round(ms * 100) / 100;
    const summary: StepSummary = { operation: this.operation, totalMs: Math.round((performance.now() - this.started) * 100) / 100, spawned: this.spawnCount, steps };
    const repeated = [...this.counts].filter(([, n]) => n > 1);
    if (repeated.length > 0) summary.repeats = Object.fromEntries(repeated);
    return summary;
  }

  /**
   * Logs the steps (at debug level unless told otherwise; not at all when
   * the level is off) and reports the total to the sinks.
   */
  finish(log: Logger, fields: Record<string, unknown> = {}, level: "debug" | "info" = "debug"): void {
    const total = performance.now() - this.started;
    for (const sink of sinks) sink(this.operation, "total", total);
    if (log.isLevelEnabled(level)) log[level]({ ...fields, ...this.summary() }, `${this.operation} steps`);
  }
}

/** `timer.time(...)` when there is a timer, else just `fn()` (for layers where timing is optional). */
export function timed<T>(timer: StepTimer | undefined, name: string, fn: () => Promise<T>, spawns = 0): Promise<T> {
  return timer ? timer.time(name, fn, spawns) : fn();
}
