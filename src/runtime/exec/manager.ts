/**
 * Running commands in CRI containers on Docker's exec API, and attaching to
 * their stdio:
 * - execSync: buffered stdout/stderr (16 MiB cap per stream), exit code,
 *   timeout enforced by killing the exec's host process tree;
 * - exec/attach: wired to caller-supplied streams (the streaming server's
 *   channels); the caller's AbortSignal means "the client went away": an
 *   exec's processes are then killed, an attach just detaches.
 * Docker connections (hijacked sockets) are always destroyed on the way out.
 */
import type { Duplex, Readable, Writable } from "node:stream";
import type { DockerClient } from "../../docker/client.ts";
import { StdStreamDemuxer, STDERR } from "../../docker/stream.ts";
import { CridockError, deadlineExceeded, failedPrecondition, notFound, withContext } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { TYPE_CONTAINER } from "../labels.ts";
import { findByIdOrPrefix } from "../lookup.ts";
import { killProcessTree } from "./process-tree.ts";
import { StepTimer, timed } from "../../steps.ts";
import { bundleProcessEnv, cdiOnlyEnv, hasCdiDevices } from "./cdi-env.ts";

/** Per-stream cap of ExecSync output (kubelet and crictl take 16 MiB messages). */
export const MAX_EXEC_SYNC_OUTPUT = 16 * 1024 * 1024;

export interface TerminalSize {
  width: number;
  height: number;
}

/** The client's side of an exec or attach. Absent streams were not requested. */
export interface StreamIO {
  stdin?: Readable;
  stdout?: Writable;
  stderr?: Writable;
  tty: boolean;
  resizes?: AsyncIterable<TerminalSize>;
}

export interface ExecSyncResult {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
}

const FULL_ID = /^[0-9a-f]{64}$/;

export class ExecService {
  private readonly log: Logger;
  /** Full ids known to be CRI containers (type labels never change), so ExecSync skips the list call. */
  private readonly knownContainers = new Set<string>();
  /**
   * Per container, what its exec processes get beside Config.Env: the
   * variables of its CDI devices (cdi-env.ts); empty for most. Learnt on its
   * first exec (one inspect), kept while it lives: a spec never changes.
   */
  private readonly execEnvs = new Map<string, string[]>();

  constructor(
    private readonly docker: DockerClient,
    logger: Logger,
  ) {
    this.log = logger.child({ component: "exec" });
  }

  /** The full id of a running CRI container; NOT_FOUND / FAILED_PRECONDITION otherwise. */
  async resolveRunning(id: string): Promise<string> {
    const found = await findByIdOrPrefix(this.docker, TYPE_CONTAINER, id, "container");
    if (!found) throw notFound(`container ${id} not found`);
    if (found.State !== "running") throw failedPrecondition(`container ${id} is not running (state ${found.State})`);
    if (this.knownContainers.size > 4096) this.knownContainers.clear();
    this.knownContainers.add(found.Id);
    return found.Id;
  }

  private async createExec(
    id: string,
    cmd: string[],
    io: { stdin: boolean; tty: boolean },
    timer?: StepTimer,
  ): Promise<{ containerId: string; execId: string }> {
    // Fast path for full ids seen before: Docker itself reports gone (404) or stopped (409) containers.
    const containerId = FULL_ID.test(id) && this.knownContainers.has(id) ? id : await timed(timer, "docker.list", () => this.resolveRunning(id));
    try {
      const env = this.execEnvs.get(containerId) ?? (await timed(timer, "exec.env", () => this.learnExecEnv(containerId)));
      const { Id } = await timed(timer, "docker.exec.create", () => this.docker.execCreate(containerId, {
        AttachStdin: io.stdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: io.tty,
        Cmd: cmd,
        Env: env.length > 0 ? env : undefined,
      }));
      return { containerId, execId: Id };
    } catch (err) {
      if (err instanceof CridockError && err.code === "NOT_FOUND") this.knownContainers.delete(containerId);
      throw withContext(`cannot exec in container ${id}`, err, "UNKNOWN");
    }
  }

  /** The CDI variables of a running container's spec (none without CDI devices). */
  private async learnExecEnv(containerId: string): Promise<string[]> {
    const c = await this.docker.inspectContainer(containerId);
    let env: string[] = [];
    if (hasCdiDevices(c)) {
      const spec = await bundleProcessEnv(c.Id, c.State.Pid);
      if (spec) env = cdiOnlyEnv(spec, c.Config.Env ?? []);
      else this.log.warn({ container: c.Id }, "exec: the container's OCI spec was not found; its CDI devices' environment is not given to exec processes");
    }
    // Learnt from a running container only: before it runs there is no spec to read.
    if (!c.State.Running) return env;
    if (this.execEnvs.size > 4096) this.execEnvs.clear();
    this.execEnvs.set(containerId, env);
    return env;
  }

  async execSync(id: string, cmd: string[], timeoutSeconds: number, signal?: AbortSignal): Promise<ExecSyncResult> {
    const timer = new StepTimer("ExecSync");
    const { execId } = await this.createExec(id, cmd, { stdin: false, tty: false }, timer);
    // No signal on the start itself: aborting it mid-way could leave the process running with
    // nobody holding it; a cancel is handled (by killing) once the start has returned.
    const socket = await timer.time("docker.exec.start", () => this.docker.execStart(execId, { tty: false }));
    const streamStarted = performance.now();
    const out: Buffer[][] = [[], []];
    const sizes = [0, 0];
    let failure: CridockError | undefined;
    const stop = (err: CridockError) => {
      if (failure) return;
      failure = err;
      void this.killExec(execId).finally(() => socket.destroy());
    };
    const deadline =
      timeoutSeconds > 0
        ? setTimeout(() => stop(deadlineExceeded(`command ${JSON.stringify(cmd)} in container ${id} timed out after ${timeoutSeconds}s and was killed`)), timeoutSeconds * 1000)
        : undefined;
    const onAbort = () => stop(new CridockError("CANCELLED", `exec in container ${id} cancelled by the client; the command was killed`));
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort();
    try {
      const demuxer = new StdStreamDemuxer();
      await consume(socket, (chunk) => {
        for (const frame of demuxer.push(chunk)) {
          const index = frame.stream === STDERR ? 1 : 0;
          sizes[index]! += frame.data.length;
          if (sizes[index]! > MAX_EXEC_SYNC_OUTPUT) {
            stop(
              new CridockError(
                "RESOURCE_EXHAUSTED",
                `command ${JSON.stringify(cmd)} in container ${id} wrote more than ${MAX_EXEC_SYNC_OUTPUT} bytes to ${index ? "stderr" : "stdout"}; it was killed (use Exec for large output)`,
              ),
            );
            return;
          }
          out[index]!.push(frame.data);
        }
      });
    } finally {
      clearTimeout(deadline);
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
    }
    timer.record("exec.output", performance.now() - streamStarted);
    if (failure) throw failure;
    const exitCode = await this.exitCode(execId, timer);
    timer.finish(this.log, { execId });
    return { stdout: Buffer.concat(out[0]!), stderr: Buffer.concat(out[1]!), exitCode };
  }

  /** Runs `cmd` wired to `io`; resolves to its exit code. `signal` = the client is gone: kill it. */
  async exec(id: string, cmd: string[], io: StreamIO, signal: AbortSignal): Promise<number> {
    const { execId } = await this.createExec(id, cmd, { stdin: io.stdin !== undefined, tty: io.tty });
    const socket = await this.docker.execStart(execId, { tty: io.tty }); // no signal: see execSync
    let killed: Promise<void> | undefined;
    const onAbort = () => {
      this.log.info({ execId, container: id }, "exec client went away; killing the command");
      // Closed first: nobody reads its output any more, and dockerd, blocked writing into a
      // connection no one drains, held up its own answers about this exec (the exec inspect
      // that killExec waits on), and other execs into the container with them.
      socket.destroy();
      killed = this.killExec(execId);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    void this.followResizes(io.resizes, (size) => this.docker.execResize(execId, size.height, size.width));
    try {
      await wire(socket, io);
    } finally {
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
    }
    if (signal.aborted) {
      // The session ends only once the command is dead: a server stopping waits on its
      // sessions, and must not exit while the kill is still on its way.
      await killed;
      throw new CridockError("CANCELLED", `exec in container ${id} cancelled by the client`);
    }
    return this.exitCode(execId);
  }

  /** Attaches `io` to the container's main process; earlier output is not replayed (logs=0). */
  async attach(id: string, io: StreamIO, signal: AbortSignal): Promise<void> {
    const containerId = await this.resolveRunning(id);
    const inspect = await this.docker.inspectContainer(containerId);
    const tty = inspect.Config.Tty === true;
    if (io.stdin && !inspect.Config.OpenStdin) {
      throw failedPrecondition(`container ${id} was not created with stdin open; attach without stdin`);
    }
    const socket = await this.docker.hijack(`/containers/${containerId}/attach`, {
      query: { stream: true, stdin: io.stdin !== undefined, stdout: true, stderr: true, logs: false },
      signal,
      timeoutMs: 0,
    });
    const onAbort = () => socket.destroy();
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    void this.followResizes(io.resizes, (size) => this.docker.resizeContainerTty(containerId, size.height, size.width));
    try {
      await wire(socket, { ...io, tty });
    } finally {
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
    }
  }

  private async followResizes(resizes: AsyncIterable<TerminalSize> | undefined, apply: (size: TerminalSize) => Promise<void>): Promise<void> {
    if (!resizes) return;
    try {
      for await (const size of resizes) {
        // The first size often arrives before Docker has started the process, when a resize
        // fails; retry briefly (API 1.41 has no ConsoleSize on exec create).
        for (let attempt = 0; ; attempt++) {
          try {
            await apply(size);
            break;
          } catch (err) {
            if (attempt >= 10) {
              this.log.debug({ err, size }, "terminal resize failed");
              break;
            }
            await new Promise((r) => setTimeout(r, 10 * (attempt + 1)));
          }
        }
      }
    } catch {
      // the resize stream was torn down with the session
    }
  }

  /** Kills the exec's process tree from the host (Docker cannot kill an exec). */
  private async killExec(execId: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    try {
      // Docker answers the start before it records the process as running: a client that
      // leaves at once must not leave the command behind, so wait for it to show up.
      for (;;) {
        const info = await this.docker.execInspect(execId);
        if (!info.Running && info.ExitCode !== null) return; // already finished
        if (info.Running && info.Pid > 1) {
          const pids = await killProcessTree(info.Pid);
          this.log.info({ execId, pids }, "killed exec processes");
          break;
        }
        if (Date.now() > deadline) throw new Error("the exec never showed a running process");
        await new Promise((r) => setTimeout(r, 20));
      }
      // Return only once the process is reaped: a caller may look for it (critest runs pgrep) right after.
      while (Date.now() < deadline && (await this.docker.execInspect(execId)).Running) {
        await new Promise((r) => setTimeout(r, 20));
      }
    } catch (err) {
      this.log.warn({ err, execId }, "could not kill an exec's processes");
    }
  }

  /** The exit code, once Docker has recorded it (it may lag the end of the output by a moment). */
  private async exitCode(execId: string, timer?: StepTimer): Promise<number> {
    // Docker may clear Running a moment after the output ends: ask again soon, then back off.
    let delay = 1;
    const deadline = Date.now() + 10_000;
    for (;;) {
      const info = await timed(timer, "docker.exec.inspect", () => this.docker.execInspect(execId));
      if (!info.Running && info.ExitCode !== null) return info.ExitCode;
      if (Date.now() > deadline) throw new CridockError("UNKNOWN", `exec ${execId} output ended but Docker still reports it running`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 200);
    }
  }
}

/** Feeds every chunk of `socket` to `onChunk` until it ends or is destroyed. */
function consume(socket: Duplex, onChunk: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve) => {
    const done = () => resolve();
    socket.on("data", (chunk: Buffer) => {
      try {
        onChunk(chunk);
      } catch {
        // A malformed Docker stream: stop here rather than deliver garbage.
        socket.destroy();
      }
    });
    socket.once("end", done);
    socket.once("close", done);
    socket.once("error", done);
  });
}

/**
 * Copies the Docker stream to stdout/stderr (demultiplexed unless tty) and
 * stdin to Docker, with backpressure both ways; resolves when Docker ends the
 * output. stdin's end half-closes Docker's side, which closes the process's stdin.
 */
function wire(socket: Duplex, io: StreamIO): Promise<void> {
  const { stdin, stdout, stderr, tty } = io;
  if (stdin) {
    stdin.on("data", (chunk: Buffer) => {
      if (!socket.write(chunk)) stdin.pause();
    });
    socket.on("drain", () => stdin.resume());
    stdin.once("end", () => socket.end());
    stdin.on("error", () => undefined);
  }
  const write = (target: Writable | undefined, data: Buffer) => {
    if (!target || target.destroyed || target.writableEnded) return;
    if (!target.write(data)) {
      socket.pause();
      // A target destroyed while full never drains: read on (what comes is dropped above), so
      // Docker's side is never left blocked behind a connection nobody reads.
      const resume = () => {
        target.off("drain", resume);
        target.off("close", resume);
        socket.resume();
      };
      target.once("drain", resume);
      target.once("close", resume);
    }
  };
  const demuxer = tty ? undefined : new StdStreamDemuxer();
  return consume(socket, (chunk) => {
    if (!demuxer) return write(stdout, chunk);
    for (const frame of demuxer.push(chunk)) write(frame.stream === STDERR ? stderr : stdout, frame.data);
  });
}
