/**
 * Runs the short-lived programs of pod networking (CNI plugins, mount and
 * umount of netns handles) from a worker thread, so their fork and exec never
 * stall the event loop that answers Version, Status and the streaming
 * server. Node's spawn forks and then waits on the calling thread until the
 * child has exec'd; on a node whose cores are saturated (a burst of pod
 * deletions) that wait took 0.2–0.5 s of cridock's main thread.
 *
 * The worker is plain JavaScript given as a string (eval), so it needs no
 * file beside the bundle or the single executable, and runs on Node and Deno
 * 2 alike. It starts on first use and ends after IDLE_MS without work (a
 * worker holds about 10 MB); a worker that cannot be had leaves spawning on
 * the main thread, as before. Timeouts and cancellation are decided here and
 * carried out by the worker (SIGKILL).
 */
import { spawn } from "node:child_process";
import { Worker } from "node:worker_threads";

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
  /** The child could not be started (ENOENT, EACCES …). */
  spawnError?: Error;
}

/** A worker with nothing to run ends after this long. */
const IDLE_MS = 30_000;
/** Output beyond this much per stream is cut (plugins print a few KB). */
const MAX_OUTPUT = 4 << 20;

// The worker's code: spawn, collect, report. Kept to node: built-ins and plain JavaScript.
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { spawn } = require("node:child_process");
const children = new Map();
parentPort.on("message", (m) => {
  if (m.type === "kill") {
    const child = children.get(m.id);
    if (child) child.kill("SIGKILL");
    return;
  }
  let child;
  try {
    child = spawn(m.command, m.args, { env: m.env, stdio: ["pipe", "pipe", "pipe"] });
  } catch (err) {
    parentPort.postMessage({ id: m.id, code: null, signal: null, stdout: "", stderr: "", error: { message: String(err && err.message), code: err && err.code } });
    return;
  }
  children.set(m.id, child);
  const out = { stdout: "", stderr: "" };
  const collect = (name) => (d) => {
    if (out[name].length < ${MAX_OUTPUT}) out[name] += d.toString();
  };
  child.stdout.on("data", collect("stdout"));
  child.stderr.on("data", collect("stderr"));
  child.stdin.on("error", () => undefined);
  child.stdin.end(m.stdin);
  let error;
  child.on("error", (err) => {
    error = { message: String(err && err.message), code: err && err.code };
  });
  child.on("close", (code, signal) => {
    children.delete(m.id);
    parentPort.postMessage({ id: m.id, code, signal, stdout: out.stdout, stderr: out.stderr, error });
  });
});
`;

interface Reply {
  id: number;
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  error?: { message: string; code?: string };
}

interface Job {
  resolve: (r: RunResult) => void;
  killedFor?: string;
}

class Spawner {
  private worker: Worker | undefined;
  private unavailable = false;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private idle: ReturnType<typeof setTimeout> | undefined;

  run(options: RunOptions): Promise<RunResult> {
    const worker = this.ensureWorker();
    if (!worker) return runHere(options);
    clearTimeout(this.idle);
    const id = this.nextId++;
    return new Promise<RunResult>((resolve) => {
      const job: Job = { resolve };
      const kill = (reason: string) => {
        if (job.killedFor) return;
        job.killedFor = reason;
        worker.postMessage({ type: "kill", id });
      };
      const timer = setTimeout(() => kill(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
      const onAbort = () => kill("cancelled by the caller");
      options.signal?.addEventListener("abort", onAbort, { once: true });
      job.resolve = (r) => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        resolve(r);
      };
      this.jobs.set(id, job);
      // A run under way keeps cridock alive until its reply; an idle worker does not.
      if (this.jobs.size === 1) worker.ref();
      worker.postMessage({ type: "run", id, command: options.command, args: options.args ?? [], env: options.env, stdin: options.stdin ?? "" });
      if (options.signal?.aborted) onAbort();
    });
  }

  private ensureWorker(): Worker | undefined {
    if (this.worker || this.unavailable) return this.worker;
    let worker: Worker;
    try {
      // No node flags of the parent (loader hooks): the worker needs none, and some keep it alive.
      worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
    } catch {
      this.unavailable = true;
      return undefined;
    }
    worker.on("message", (reply: Reply) => this.finish(reply));
    const fail = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const [id, job] of this.jobs) {
        this.jobs.delete(id);
        job.resolve({ code: null, signal: null, stdout: "", stderr: "", killedFor: job.killedFor, spawnError: new Error(`the process-spawning worker ${why}`) });
      }
    };
    worker.on("error", (err) => fail(`failed: ${err.message}`));
    worker.on("exit", (code) => fail(`exited with ${code}`));
    // Not what keeps cridock running while idle (run() refs it while a job is under way).
    // After the listeners: adding a message listener refs the port again.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private finish(reply: Reply): void {
    const job = this.jobs.get(reply.id);
    if (!job) return;
    this.jobs.delete(reply.id);
    const spawnError = reply.error ? Object.assign(new Error(reply.error.message), { code: reply.error.code }) : undefined;
    job.resolve({ code: reply.code, signal: reply.signal, stdout: reply.stdout, stderr: reply.stderr, killedFor: job.killedFor, spawnError });
    if (this.jobs.size === 0) {
      this.worker?.unref();
      clearTimeout(this.idle);
      this.idle = setTimeout(() => this.stopIdle(), IDLE_MS);
      this.idle.unref?.();
    }
  }

  private stopIdle(): void {
    if (this.jobs.size > 0 || !this.worker) return;
    const worker = this.worker;
    this.worker = undefined;
    void worker.terminate();
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
    child.stdout.on("data", (d: Buffer) => {
      if (out.stdout.length < MAX_OUTPUT) out.stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      if (out.stderr.length < MAX_OUTPUT) out.stderr += d.toString();
    });
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

const shared = new Spawner();

/** Runs a program to its end off the main thread; never rejects (the result says what happened). */
export function runProcess(options: RunOptions): Promise<RunResult> {
  return shared.run(options);
}
