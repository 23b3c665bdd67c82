/**
 * Runs cridock as a real child process (Node through tsx, or Deno) on a
 * private socket and root directory, waits until it serves, and stops or
 * kills it. Tests that kill -9 cridock or restart it use this.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Test } from "tap";
import { mkdtemp, rm, rmdir } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CriClient } from "./cri-client.ts";
import { TEST_DOCKER_ENDPOINT } from "./env.ts";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * V8 flags Deno runs cridock with (docs/install.md): Deno ignores
 * node:v8's setFlagsFromString, through which cridock keeps llhttp on
 * baseline code under Node (src/docker/undici-pool.ts), and keeps its young
 * generation at its full 8 MB where Node's shrinks once idle.
 */
export const DENO_V8_FLAGS = "--v8-flags=--liftoff-only,--max-semi-space-size=1";

export interface CridockProcessOptions {
  /** Extra flags; --container-runtime-endpoint, --root-directory and --docker-endpoint (the test engine) are set unless given. */
  flags?: string[];
  runtime?: "node" | "deno";
  /** Reuse this socket/root (for restart tests). */
  socketPath?: string;
  rootDirectory?: string;
  env?: Record<string, string>;
  /** Node entry script to run instead of this tree's bin/cridock.js (benchmarks compare two trees). */
  entry?: string;
  /**
   * A self-contained executable (scripts/build/binary.ts) to run instead of a node or deno:
   * benchmarks put the executables of two trees side by side. It takes no node flags.
   */
  executable?: string;
  /** Extra node flags (e.g. V8 heap flags). */
  nodeFlags?: string[];
  /** Waits for the socket at most this long. */
  startTimeoutMs?: number;
}

export interface CridockProcess {
  socketPath: string;
  rootDirectory: string;
  child: ChildProcess;
  client: CriClient;
  /** Everything cridock logged so far (stderr). */
  logs(): string;
  /** SIGTERM and wait; resolves to the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
}

export async function startCridockProcess(options: CridockProcessOptions = {}): Promise<CridockProcess> {
  const scratch = await mkdtemp(join(tmpdir(), "cridock-test-"));
  // The scratch directory holds what the caller did not place: it goes with the process,
  // except for a socket or root a restart on the same paths needs (rmdir removes it only when empty).
  const cleanScratch = () =>
    !options.socketPath && !options.rootDirectory ? rm(scratch, { recursive: true, force: true }) : rmdir(scratch).catch(() => undefined);
  const socketPath = options.socketPath ?? join(scratch, "cridock.sock");
  const rootDirectory = options.rootDirectory ?? join(scratch, "root");
  const flags = [...(options.flags ?? [])];
  if (!flags.some((f) => f.startsWith("--container-runtime-endpoint"))) {
    flags.push(`--container-runtime-endpoint=unix://${socketPath}`);
  }
  if (!flags.some((f) => f.startsWith("--root-directory"))) flags.push(`--root-directory=${rootDirectory}`);
  if (!flags.some((f) => f.startsWith("--docker-endpoint"))) flags.push(`--docker-endpoint=${TEST_DOCKER_ENDPOINT}`);
  if (options.executable && (options.runtime === "deno" || options.entry || options.nodeFlags?.length)) {
    throw new Error("startCridockProcess: an executable takes no runtime, entry or node flags");
  }
  const [command, args]: [string, string[]] = options.executable
    ? [options.executable, flags]
    : options.runtime === "deno"
      ? [join(REPO_ROOT, "node_modules/.bin/deno"), ["run", "-A", DENO_V8_FLAGS, join(REPO_ROOT, "src/main.ts"), ...flags]]
      : [process.execPath, [...(options.nodeFlags ?? []), options.entry ?? join(REPO_ROOT, "bin/cridock.js"), ...flags]];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    // As the systemd unit and scripts/run-cridock.sh run it (libuv reads this at node's start).
    env: { UV_THREADPOOL_SIZE: "16", ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return serveChild({ name: "cridock", child, socketPath, rootDirectory, scratch, cleanScratch, startTimeoutMs: options.startTimeoutMs });
}

/** A runtime child process just spawned, with the paths it serves on and what its stop removes. */
export interface SpawnedRuntime {
  /** What errors call it ("cridock", "cri-dockerd"). */
  name: string;
  child: ChildProcess;
  socketPath: string;
  rootDirectory: string;
  /** The scratch directory holding what the caller did not place. */
  scratch: string;
  /** Removes the scratch directory after a stop. */
  cleanScratch(): Promise<unknown>;
  /** Waits for the socket at most this long (30 s). */
  startTimeoutMs?: number;
  /** Keeps only this much of the child's output (all of it when unset). */
  outputLimit?: number;
}

/** Waits until a spawned runtime serves on its socket, and gives the handle tests stop or kill it with. */
export async function serveChild(spawned: SpawnedRuntime): Promise<CridockProcess> {
  const { name, child, socketPath, rootDirectory, scratch } = spawned;
  let output = "";
  const take = (d: Buffer) => {
    output += d.toString();
    if (spawned.outputLimit && output.length > spawned.outputLimit) output = output.slice(-spawned.outputLimit);
  };
  child.stdout!.on("data", take);
  child.stderr!.on("data", take);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const deadline = Date.now() + (spawned.startTimeoutMs ?? 30_000);
  // Serving means the socket accepts connections (whatever the log level).
  while (!(await accepts(socketPath))) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode} before serving:\n${output}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${name} did not serve on ${socketPath} in time:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const client = new CriClient(socketPath);
  return {
    socketPath,
    rootDirectory,
    child,
    client,
    logs: () => output,
    async stop() {
      client.close();
      if (child.exitCode === null) child.kill("SIGTERM");
      const code = await exited;
      await spawned.cleanScratch();
      return code;
    },
    async kill() {
      client.close();
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
      // A killed process is restarted on its socket and root: only an empty scratch goes.
      await rmdir(scratch).catch(() => undefined);
    },
  };
}

/** Whether a unix socket accepts a connection now (the server behind it is listening). */
export function accepts(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** A built cridock (bundle, executable, installed package) run as a plain child: its stderr kept, its exit awaited. */
export interface BuiltCridock {
  child: ChildProcess;
  /** What it wrote to stderr so far (its structured log). */
  stderr(): string;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
}

/** Spawns COMMAND with stdout ignored and stderr kept; SIGKILLed at the test's teardown if still running. */
export function spawnBuiltCridock(t: Test, command: string, args: string[], env?: NodeJS.ProcessEnv): BuiltCridock {
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"], ...(env ? { env } : {}) });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  return { child, stderr: () => stderr, exited };
}
