/**
 * The messages between cridock's main thread and the worker threads that
 * spawn short-lived programs (spawner.ts), and the worker's own code.
 *
 * The worker is plain JavaScript given as a string (eval), so it needs no
 * file beside the bundle or the single executable and runs on Node and Deno 2
 * alike (both implement node:worker_threads and node:child_process inside a
 * worker). It only carries out: spawn, say so (the main thread counts the
 * spawns a worker has yet to start), collect, report, and SIGKILL when
 * told. Timeouts and cancellation are decided on the main thread, so a
 * worker never holds a timer per child.
 */

/** Output beyond this much per stream is cut (plugins print a few KB). */
export const MAX_OUTPUT = 4 << 20;

/** Main thread → worker: start a program. */
export interface RunRequest {
  type: "run";
  id: number;
  command: string;
  args: string[];
  /** The child's whole environment; the worker's (the process's) when absent. */
  env?: Record<string, string>;
  /** Written to the child's stdin, which is then closed. */
  stdin: string;
}

/** Main thread → worker: SIGKILL the program of a run (a timeout or a cancellation). */
export interface KillRequest {
  type: "kill";
  id: number;
}

export type WorkerRequest = RunRequest | KillRequest;

/** Worker → main thread: a run's program has been forked and exec'd (spawn returned); the worker can take the next. */
export interface StartedReply {
  type: "started";
  id: number;
  pid: number;
}

/** Worker → main thread: a run ended (or never started: `error`). */
export interface RunReply {
  type: "done";
  id: number;
  /** Exit code, or null when a signal ended the child. */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** spawn's error (ENOENT, EACCES …), as plain data: Errors do not cross threads with their code. */
  error?: { message: string; code?: string };
}

export type WorkerReply = StartedReply | RunReply;

/**
 * A worker's message, checked: a reply that does not have the shape above
 * (a bug in the worker's code, or a message not meant for cridock) is
 * refused rather than taken for a run's result.
 */
export function decodeReply(message: unknown): WorkerReply {
  if (typeof message !== "object" || message === null) throw new Error(`spawn worker sent ${describe(message)}, not a reply`);
  const m = message as Record<string, unknown>;
  if (!Number.isSafeInteger(m.id)) throw new Error(`spawn worker reply without a run id: ${describe(m.id)}`);
  if (m.type === "started") {
    if (!Number.isSafeInteger(m.pid) || (m.pid as number) <= 0) throw new Error(`spawn worker reply ${m.id}: pid ${describe(m.pid)}`);
    return { type: "started", id: m.id as number, pid: m.pid as number };
  }
  if (m.type !== "done") throw new Error(`spawn worker reply ${m.id}: unknown type ${describe(m.type)}`);
  if (m.code !== null && !Number.isInteger(m.code)) throw new Error(`spawn worker reply ${m.id}: exit code ${describe(m.code)}`);
  if (m.signal !== null && typeof m.signal !== "string") throw new Error(`spawn worker reply ${m.id}: signal ${describe(m.signal)}`);
  if (typeof m.stdout !== "string" || typeof m.stderr !== "string") throw new Error(`spawn worker reply ${m.id}: output is not text`);
  const reply: RunReply = { type: "done", id: m.id as number, code: m.code as number | null, signal: m.signal as string | null, stdout: m.stdout, stderr: m.stderr };
  if (m.error !== undefined) {
    const e = m.error as Record<string, unknown> | null;
    if (typeof e !== "object" || e === null || typeof e.message !== "string") throw new Error(`spawn worker reply ${m.id}: error ${describe(m.error)}`);
    reply.error = { message: e.message, ...(typeof e.code === "string" ? { code: e.code } : {}) };
  }
  return reply;
}

/** spawn's error again as an Error with its errno code (what callers test for ENOENT). */
export function replyError(reply: RunReply): (Error & { code?: string }) | undefined {
  if (!reply.error) return undefined;
  return Object.assign(new Error(reply.error.message), reply.error.code === undefined ? {} : { code: reply.error.code });
}

function describe(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.slice(0, 100);
}

/**
 * The spawning loop, as plain JavaScript: kept to node: built-ins (no
 * TypeScript, no imports of cridock's modules: they would have to be
 * loaded from files the single executable does not have). `send` and
 * `onMessage` are the transport: a worker's port, or a helper process's
 * stdin and stdout. A child that cannot be started replies at once with the
 * error; one that runs says "started", then replies on close, when both its
 * output streams have ended.
 */
const SPAWN_LOOP = `
const { spawn } = require("node:child_process");
const MAX_OUTPUT = ${MAX_OUTPUT};
const children = new Map();
const plain = (err) => ({ message: String(err && err.message), code: err && typeof err.code === "string" ? err.code : undefined });
const serve = (send, onMessage) => onMessage((m) => {
  if (m.type === "kill") {
    const child = children.get(m.id);
    if (child) child.kill("SIGKILL");
    return;
  }
  if (m.type !== "run") return;
  let child;
  try {
    child = spawn(m.command, m.args, { env: m.env, stdio: ["pipe", "pipe", "pipe"] });
  } catch (err) {
    send({ type: "done", id: m.id, code: null, signal: null, stdout: "", stderr: "", error: plain(err) });
    return;
  }
  children.set(m.id, child);
  // No pid: the spawn failed (ENOENT …) and "error" and "close" follow.
  if (child.pid) send({ type: "started", id: m.id, pid: child.pid });
  const out = { stdout: "", stderr: "" };
  const collect = (name) => (d) => {
    if (out[name].length < MAX_OUTPUT) out[name] += d.toString().slice(0, MAX_OUTPUT - out[name].length);
  };
  child.stdout.on("data", collect("stdout"));
  child.stderr.on("data", collect("stderr"));
  child.stdin.on("error", () => undefined); // a child may exit without reading its stdin
  child.stdin.end(m.stdin);
  let error;
  child.on("error", (err) => {
    error = plain(err);
  });
  child.on("close", (code, signal) => {
    children.delete(m.id);
    send({ type: "done", id: m.id, code, signal, stdout: out.stdout, stderr: out.stderr, error });
  });
});
`;

/** A worker thread's code: the loop on its parent port. */
export const WORKER_SOURCE = `${SPAWN_LOOP}
const { parentPort } = require("node:worker_threads");
serve((m) => parentPort.postMessage(m), (fn) => parentPort.on("message", fn));
`;

/**
 * A helper process's code (`node -e`, `deno eval --ext=cjs`): the loop on JSON lines, requests on
 * stdin and replies on stdout. It ends when its stdin does (cridock
 * stopped, died or let it go idle).
 */
export const HELPER_SOURCE = `${SPAWN_LOOP}
const lines = require("node:readline").createInterface({ input: process.stdin });
serve((m) => process.stdout.write(JSON.stringify(m) + "\\n"), (fn) => lines.on("line", (line) => fn(JSON.parse(line))));
lines.on("close", () => process.exit(0));
`;
