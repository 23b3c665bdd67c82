/**
 * Where the spawner's loop (spawn-protocol.ts) runs, behind one interface:
 *
 * - "process": a small helper process (`node -e`, or `deno eval` under
 *   Deno), fed JSON lines. The default on both:
 *   - On Node, a fork copies the forking process's page tables and
 *     write-protects all of its memory, whichever thread forks: each plugin
 *     forked from cridock itself made cridock's main thread take a page
 *     fault for every page it wrote next (about 0.9 µs per 4 KiB, 15 ms to
 *     write 64 MiB once). The helper's own memory is a few MB, so its forks
 *     cost little and cridock's memory is never touched.
 *   - Deno spawns with vfork (CLONE_VM|CLONE_VFORK: nothing copied), but a
 *     worker there is a second Deno runtime inside cridock: about 21 MB of
 *     resident memory, of which ending the worker gave back 4.5. The helper
 *     process holds its own and gives all of it back when it ends idle.
 * - "worker": a worker thread of cridock, for the single executable, which
 *   has no node or deno to run a helper's source with; and where a helper
 *   cannot be had.
 */
import { spawn, type ChildProcess } from "node:child_process";
import process from "node:process";
import { createInterface } from "node:readline";
import { Worker } from "node:worker_threads";
import { isSelfContained } from "../self-command.ts";
import { HELPER_SOURCE, WORKER_SOURCE, type WorkerRequest } from "./spawn-protocol.ts";

export type ChannelKind = "process" | "worker";

export interface SpawnChannel {
  send(request: WorkerRequest): void;
  /** While unref'd, the channel does not keep cridock running. */
  ref(): void;
  unref(): void;
  close(): Promise<void>;
}

export interface ChannelEvents {
  message(message: unknown): void;
  /** The channel ended on its own (crash, exit); not called after close(). */
  failed(why: string): void;
}

/** Starts a channel; throws when it cannot be had (the caller then spawns on the main thread). */
export function openChannel(kind: ChannelKind, events: ChannelEvents): SpawnChannel {
  return kind === "process" ? helperProcess(events) : workerThread(events);
}

/** Which kind suits this runtime: the single executable takes a worker thread, node and deno a helper process. */
export function defaultChannelKind(): ChannelKind {
  // The executable's process.execPath is cridock itself, not a node that runs `-e`.
  return isSelfContained() ? "worker" : "process";
}

function workerThread(events: ChannelEvents): SpawnChannel {
  // No node flags of the parent (loader hooks): the worker needs none, and some keep it alive.
  const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
  let closed = false;
  worker.on("message", (m: unknown) => events.message(m));
  worker.on("error", (err: Error) => closed || events.failed(`failed: ${err.message}`));
  worker.on("exit", (code) => closed || events.failed(`exited with ${code}`));
  // After the listeners: adding a message listener refs the port again.
  worker.unref();
  return {
    send: (request) => worker.postMessage(request),
    ref: () => worker.ref(),
    unref: () => worker.unref(),
    close: async () => {
      closed = true;
      await worker.terminate().catch(() => undefined);
    },
  };
}

function helperProcess(events: ChannelEvents): SpawnChannel {
  const [args, env] = helperCommand();
  const child: ChildProcess = spawn(process.execPath, args, { env, stdio: ["pipe", "pipe", "pipe"] });
  let closed = false;
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000);
  });
  const fail = (why: string) => {
    if (closed) return;
    closed = true;
    events.failed(stderr.trim() ? `${why}: ${stderr.trim()}` : why);
  };
  child.on("error", (err) => fail(`could not be started: ${err.message}`));
  child.on("exit", (code, signal) => fail(`exited with ${code ?? signal}`));
  child.stdin!.on("error", (err) => fail(`stopped reading: ${err.message}`));
  const lines = createInterface({ input: child.stdout! });
  lines.on("line", (line) => {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      message = line; // decodeReply refuses it, with the text
    }
    events.message(message);
  });
  const handles = () => [child, child.stdin, child.stdout, child.stderr] as unknown as { ref?(): void; unref?(): void }[];
  const setRef = (on: boolean) => {
    for (const h of handles()) (on ? h?.ref : h?.unref)?.call(h);
  };
  setRef(false);
  return {
    send: (request) => {
      if (!closed) child.stdin!.write(`${JSON.stringify(request)}\n`);
    },
    ref: () => setRef(true),
    unref: () => setRef(false),
    close: async () => {
      if (closed || child.exitCode !== null || child.signalCode !== null) return;
      closed = true;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.stdin!.end(); // the helper ends with its stdin
      const timer = setTimeout(() => child.kill("SIGKILL"), 2_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The helper's arguments and environment for the runtime cridock runs on (process.execPath is node or deno). */
function helperCommand(): [string[], NodeJS.ProcessEnv] {
  // NODE_OPTIONS and DENO_V8_FLAGS are cridock's (loaders, heap sizes), not the helper's; the programs it runs are neither.
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  if (!("Deno" in globalThis)) return [["-e", HELPER_SOURCE], env];
  delete env.DENO_V8_FLAGS;
  // No deno.json or lock file of the working directory applies to it, and no release check reaches out.
  env.DENO_NO_UPDATE_CHECK = "1";
  return [["eval", "--quiet", "--no-config", "--no-lock", "--ext=cjs", HELPER_SOURCE], env];
}
