/**
 * Runs the short-lived programs of pod networking (CNI plugins, mount and
 * umount of netns handles, nsenter) away from cridock's main thread, so
 * their fork and exec never stall the event loop that answers Version,
 * Status and the streaming server. Node's spawn forks and then waits on the
 * calling thread until the child has exec'd; on a node whose cores are
 * saturated (a burst of pod deletions) that wait took 0.2–0.5 s of
 * cridock's main thread. The workers are small helper processes on Node
 * and Deno, and threads in the single executable (spawn-channel.ts says
 * why); their messages and code are in spawn-protocol.ts.
 *
 * Why a pool and not one worker: a worker is itself held in fork and exec
 * for each child it starts (about 2 ms, and far more when it loses its core
 * midway on a saturated node), so the programs of a mass deletion queue
 * behind one another there. But each worker holds memory (a thread about
 * 10 MB), so a second one starts only when forks do queue: when every
 * worker still has a spawn it has not started (the worker says "started"
 * once spawn returns). Each run goes to the worker with the fewest such
 * spawns. Workers start on first use and end after `idleMs` without work;
 * where none can be had, spawning stays on the main thread, as before.
 * Timeouts and cancellation are decided here and carried out by the worker
 * (SIGKILL); a worker that does not answer a kill is not waited for.
 */
import { spawn } from "node:child_process";
import { defaultChannelKind, openChannel, type ChannelKind, type SpawnChannel } from "./spawn-channel.ts";
import { decodeReply, MAX_OUTPUT, replyError, type WorkerReply, type WorkerRequest } from "./spawn-protocol.ts";

export interface RunOptions {
  command: string;
  args?: string[];
  /** The child's whole environment; the parent's when absent. */
  env?: Record<string, string>;
  /** Written to the child's stdin, which is then closed. */
  stdin?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface RunResult {
  /** Exit code, or null when a signal ended the child. */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Why cridock killed it: a timeout or the caller's cancellation. */
  killedFor?: string;
  /** The child could not be started (ENOENT, EACCES …), or its worker failed. */
  spawnError?: Error;
}

export interface PoolOptions {
  /** Helper processes or worker threads (spawn-channel.ts); by default what suits the runtime. */
  kind?: ChannelKind;
  /**
   * At most this many workers. Threads: 2 (a thread can lose its core in the
   * middle of a fork of all of cridock). Helper processes: 1 (their forks
   * are of a few MB and take well under a millisecond).
   */
  size?: number;
  /** A worker with nothing to run ends after this long (helper processes 5 min, threads 30 s). */
  idleMs?: number;
  /** How long a killed run's reply is waited for before the run is given up (the worker is then replaced). */
  killGraceMs?: number;
}

interface Job {
  resolve: (r: RunResult) => void;
  killedFor?: string;
}

/** One worker (a helper process or a thread) and the runs it carries out. */
interface Slot {
  channel: SpawnChannel;
  kind: ChannelKind;
  jobs: Map<number, Job>;
  /** Runs posted whose program the worker has not spawned yet. */
  unstarted: Set<number>;
  idle?: ReturnType<typeof setTimeout>;
}

export class SpawnerPool {
  /** Decided at the first run (the single executable's entry says what it is after the modules load). */
  private kind: ChannelKind | undefined;
  private readonly killGraceMs: number;
  private readonly slots: Slot[] = [];
  private unavailable = false;
  private nextId = 1;
  private peakWorkers = 0;

  constructor(private readonly options: PoolOptions = {}) {
    this.kind = options.kind;
    this.killGraceMs = options.killGraceMs ?? 5_000;
  }

  private currentKind(): ChannelKind {
    this.kind ??= defaultChannelKind();
    return this.kind;
  }

  private size(): number {
    return Math.max(1, this.options.size ?? (this.currentKind() === "process" ? 1 : 2));
  }

  private idleMs(): number {
    // Starting a helper process is itself a spawn on the main thread (a fork of all of cridock), so it
    // is kept longer: a deletion storm minutes after the pods started finds it there.
    return this.options.idleMs ?? (this.currentKind() === "process" ? 300_000 : 30_000);
  }

  /** Workers alive, runs under way, those not spawned yet, and the most workers alive at once so far (for tests and diagnostics). */
  stats(): { kind: ChannelKind | undefined; workers: number; running: number; unstarted: number; peakWorkers: number } {
    let running = 0;
    let unstarted = 0;
    for (const slot of this.slots) {
      running += slot.jobs.size;
      unstarted += slot.unstarted.size;
    }
    return { kind: this.kind, workers: this.slots.length, running, unstarted, peakWorkers: this.peakWorkers };
  }

  /** Runs a program to its end off the main thread; never rejects (the result says what happened). */
  run(options: RunOptions): Promise<RunResult> {
    const slot = this.pick();
    if (!slot) return runHere(options);
    clearTimeout(slot.idle);
    const id = this.nextId++;
    return new Promise<RunResult>((resolve) => {
      const job: Job = { resolve };
      let grace: ReturnType<typeof setTimeout> | undefined;
      const kill = (reason: string) => {
        if (job.killedFor) return;
        job.killedFor = reason;
        this.post(slot, { type: "kill", id });
        // A worker stuck in a fork, or gone wrong, must not hold the caller past its deadline for long.
        grace = setTimeout(() => void this.retire(slot, `did not report the end of a killed run within ${this.killGraceMs} ms`), this.killGraceMs);
      };
      const timer = setTimeout(() => kill(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
      const onAbort = () => kill("cancelled by the caller");
      options.signal?.addEventListener("abort", onAbort, { once: true });
      job.resolve = (r) => {
        clearTimeout(timer);
        clearTimeout(grace);
        options.signal?.removeEventListener("abort", onAbort);
        resolve(r);
      };
      slot.jobs.set(id, job);
      slot.unstarted.add(id);
      // A run under way keeps cridock alive until its reply; an idle worker does not.
      if (slot.jobs.size === 1) slot.channel.ref();
      this.post(slot, { type: "run", id, command: options.command, args: options.args ?? [], env: options.env, stdin: options.stdin ?? "" });
      if (options.signal?.aborted) onAbort();
    });
  }

  /** Ends every worker (their runs resolve as failed); for tests and shutdown. */
  async close(): Promise<void> {
    await Promise.all([...this.slots].map((slot) => this.retire(slot, "was closed")));
  }

  /** The worker with the fewest spawns to start; a new one when all have some and the pool has room; undefined: spawn here. */
  private pick(): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.slots) {
      if (!best || slot.unstarted.size < best.unstarted.size || (slot.unstarted.size === best.unstarted.size && slot.jobs.size < best.jobs.size)) best = slot;
    }
    if (best && (best.unstarted.size === 0 || this.slots.length >= this.size())) return best;
    return this.start() ?? best;
  }

  private start(): Slot | undefined {
    if (this.unavailable) return undefined;
    // Filled in below; the channel's events only come after this returns.
    const slot = { kind: this.currentKind(), jobs: new Map(), unstarted: new Set(), answered: false } as Slot & { answered: boolean };
    try {
      slot.channel = openChannel(slot.kind, {
        message: (message) => {
          slot.answered = true;
          this.finish(slot, message);
        },
        failed: (why) => {
          // A helper process that never answered cannot be had here: threads from now on.
          if (slot.kind === "process" && !slot.answered) this.kind = "worker";
          void this.retire(slot, why);
        },
      });
    } catch {
      this.unavailable = true;
      return undefined;
    }
    // Channels start unref'd: an idle worker does not keep cridock running (run() refs it while a job is under way).
    this.slots.push(slot);
    this.peakWorkers = Math.max(this.peakWorkers, this.slots.length);
    return slot;
  }

  private post(slot: Slot, request: WorkerRequest): void {
    slot.channel.send(request);
  }

  private finish(slot: Slot, message: unknown): void {
    let reply: WorkerReply;
    try {
      reply = decodeReply(message);
    } catch (err) {
      void this.retire(slot, `sent a malformed reply (${(err as Error).message})`);
      return;
    }
    slot.unstarted.delete(reply.id);
    if (reply.type === "started") return;
    const job = slot.jobs.get(reply.id);
    if (!job) return; // a run already given up
    slot.jobs.delete(reply.id);
    job.resolve({ code: reply.code, signal: reply.signal, stdout: reply.stdout, stderr: reply.stderr, killedFor: job.killedFor, spawnError: replyError(reply) });
    if (slot.jobs.size === 0) {
      slot.channel.unref();
      clearTimeout(slot.idle);
      slot.idle = setTimeout(() => {
        if (slot.jobs.size === 0) void this.retire(slot, "was idle");
      }, this.idleMs());
      slot.idle.unref?.();
    }
  }

  /** Takes a worker out of the pool; its runs under way resolve as failed (their programs may outlive it). */
  private async retire(slot: Slot, why: string): Promise<void> {
    const index = this.slots.indexOf(slot);
    if (index < 0) return;
    this.slots.splice(index, 1);
    clearTimeout(slot.idle);
    slot.unstarted.clear();
    for (const [id, job] of slot.jobs) {
      slot.jobs.delete(id);
      job.resolve({ code: null, signal: null, stdout: "", stderr: "", killedFor: job.killedFor, spawnError: new Error(`the process-spawning ${slot.kind === "process" ? "helper process" : "worker thread"} ${why}`) });
    }
    await slot.channel.close();
  }
}

/** The fallback: the same run on the main thread. */
function runHere(options: RunOptions): Promise<RunResult> {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(options.command, options.args ?? [], { env: options.env, stdio: ["pipe", "pipe", "pipe"] });
    } catch (err) {
      resolve({ code: null, signal: null, stdout: "", stderr: "", spawnError: err as Error });
      return;
    }
    const out = { stdout: "", stderr: "" };
    let killedFor: string | undefined;
    let spawnError: Error | undefined;
    const kill = (reason: string) => {
      killedFor ??= reason;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(() => kill(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
    const onAbort = () => kill("cancelled by the caller");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    const collect = (name: "stdout" | "stderr") => (d: Buffer) => {
      if (out[name].length < MAX_OUTPUT) out[name] += d.toString().slice(0, MAX_OUTPUT - out[name].length);
    };
    child.stdout.on("data", collect("stdout"));
    child.stderr.on("data", collect("stderr"));
    child.stdin.on("error", () => undefined); // a child may exit without reading stdin
    child.stdin.end(options.stdin ?? "");
    child.on("error", (err) => (spawnError = err));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      resolve({ code, signal, stdout: out.stdout, stderr: out.stderr, killedFor, spawnError });
    });
    if (options.signal?.aborted) onAbort();
  });
}

const shared = new SpawnerPool();

/** Runs a program to its end off the main thread; never rejects (the result says what happened). */
export function runProcess(options: RunOptions): Promise<RunResult> {
  return shared.run(options);
}
