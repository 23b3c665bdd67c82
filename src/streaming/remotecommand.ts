/**
 * The Kubernetes remote command protocol (exec and attach), independent of
 * transport: the channels (stdin, stdout, stderr, error, resize), the
 * protocol versions, the error-channel Status document, the resize messages,
 * and its SPDY binding (one SPDY stream per channel, named by the
 * `streamtype` header). websocket.ts binds the same channels to WebSocket.
 *
 * Versions: channel.k8s.io (v1), v2 (error channel carries text), v3 (adds
 * the resize channel), v4 (error channel carries a JSON metav1.Status, with
 * the exit code of a failed command), v5 (WebSocket only: adds a close signal
 * so stdin can be half-closed).
 */
import { finished } from "node:stream/promises";
import type { Readable, Writable } from "node:stream";
import type { Logger } from "../log.ts";
import type { StreamIO, TerminalSize } from "../runtime/exec/manager.ts";
import type { SpdySession, SpdyStream } from "./spdy.ts";
import { RstStatus } from "./spdy-frames.ts";

export const PROTOCOL_V1 = "channel.k8s.io";
export const PROTOCOL_V2 = "v2.channel.k8s.io";
export const PROTOCOL_V3 = "v3.channel.k8s.io";
export const PROTOCOL_V4 = "v4.channel.k8s.io";
export const PROTOCOL_V5 = "v5.channel.k8s.io";

/** Server preference order over SPDY (v5 adds nothing over SPDY, so v4 is chosen). */
export const SPDY_PROTOCOLS = [PROTOCOL_V4, PROTOCOL_V3, PROTOCOL_V2, PROTOCOL_V1];
/** Server preference order over WebSocket. */
export const WEBSOCKET_PROTOCOLS = [PROTOCOL_V5, PROTOCOL_V4, PROTOCOL_V3, PROTOCOL_V2, PROTOCOL_V1];

export function protocolVersion(protocol: string): number {
  const m = /^v(\d)\.channel\.k8s\.io$/.exec(protocol);
  return m ? Number(m[1]) : 1;
}

/** What Exec or Attach asked for, kept with the token. */
export interface RemoteCommandRequest {
  kind: "exec" | "attach";
  containerId: string;
  /** Empty for attach. */
  cmd: string[];
  tty: boolean;
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
}

/** The runtime side (ExecService). */
export interface RemoteCommandRuntime {
  exec(id: string, cmd: string[], io: StreamIO, signal: AbortSignal): Promise<number>;
  attach(id: string, io: StreamIO, signal: AbortSignal): Promise<void>;
}

export type ChannelName = "stdin" | "stdout" | "stderr" | "error" | "resize";

/** The channels a client opens for `request` at protocol `version`. */
export function expectedChannels(request: RemoteCommandRequest, version: number): Set<ChannelName> {
  const channels = new Set<ChannelName>(["error"]);
  if (request.stdin) channels.add("stdin");
  if (request.stdout) channels.add("stdout");
  // With a TTY, stderr is merged into stdout; clients open no stderr channel.
  if (request.stderr && !request.tty) channels.add("stderr");
  if (request.tty && version >= 3) channels.add("resize");
  return channels;
}

export type CommandOutcome = { exitCode: number } | { error: Error };

/**
 * The error channel's content for an outcome: nothing for success before v4,
 * text for failures before v4, a metav1.Status JSON document from v4 on.
 */
export function statusMessage(version: number, request: RemoteCommandRequest, outcome: CommandOutcome): Buffer | undefined {
  const what = request.kind === "exec" ? `command ${JSON.stringify(request.cmd)}` : `attach to container ${request.containerId}`;
  let failure: string | undefined;
  let exitCode: number | undefined;
  if ("error" in outcome) failure = `${what} failed: ${outcome.error.message}`;
  else if (outcome.exitCode !== 0) {
    exitCode = outcome.exitCode;
    failure = `command terminated with non-zero exit code: error executing ${what}, exit code ${exitCode}`;
  }
  if (version < 4) return failure === undefined ? undefined : Buffer.from(failure);
  if (failure === undefined) return Buffer.from(JSON.stringify({ metadata: {}, status: "Success" }));
  const status =
    exitCode !== undefined
      ? { metadata: {}, status: "Failure", message: failure, reason: "NonZeroExitCode", details: { causes: [{ reason: "ExitCode", message: String(exitCode) }] } }
      : { metadata: {}, status: "Failure", message: failure, reason: "InternalError", details: { causes: [{ message: failure }] }, code: 500 };
  return Buffer.from(JSON.stringify(status));
}

/**
 * Decodes the resize channel: a sequence of JSON objects {"Width":w,"Height":h}
 * (Go's json.Encoder output). Oversized or malformed input ends the sequence.
 */
export async function* resizeEvents(source: AsyncIterable<Buffer | string>): AsyncGenerator<TerminalSize> {
  let text = "";
  for await (const chunk of source) {
    text += typeof chunk === "string" ? chunk : chunk.toString("utf8");
    for (;;) {
      const start = text.indexOf("{");
      if (start < 0) {
        text = "";
        break;
      }
      const end = text.indexOf("}", start);
      if (end < 0) {
        text = text.slice(start);
        break;
      }
      const raw = text.slice(start, end + 1);
      text = text.slice(end + 1);
      const size = parseSize(raw);
      if (size) yield size;
    }
    if (text.length > 4096) return;
  }
}

function parseSize(raw: string): TerminalSize | undefined {
  try {
    const value = JSON.parse(raw) as { Width?: unknown; Height?: unknown };
    const width = Number(value.Width);
    const height = Number(value.Height);
    const ok = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffff;
    if (ok(width) && ok(height) && (width > 0 || height > 0)) return { width, height };
  } catch {
    // not JSON: skip it
  }
  return undefined;
}

export interface CommandChannels {
  stdin?: Readable;
  stdout?: Writable;
  stderr?: Writable;
  resize?: Readable;
  /** Receives the status message (if any) and is then ended. */
  error?: Writable;
}

/**
 * Runs the command over `channels` and reports its outcome on the error
 * channel; output channels are ended (and flushed) before the status is
 * written, as clients wait for stdout/stderr before reading the status.
 */
export async function runRemoteCommand(
  runtime: RemoteCommandRuntime,
  request: RemoteCommandRequest,
  channels: CommandChannels,
  version: number,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  const io: StreamIO = {
    stdin: request.stdin ? channels.stdin : undefined,
    stdout: request.stdout ? channels.stdout : undefined,
    stderr: request.stderr && !request.tty ? channels.stderr : undefined,
    tty: request.tty,
    resizes: channels.resize ? resizeEvents(channels.resize) : undefined,
  };
  let outcome: CommandOutcome;
  try {
    if (request.kind === "exec") outcome = { exitCode: await runtime.exec(request.containerId, request.cmd, io, signal) };
    else {
      await runtime.attach(request.containerId, io, signal);
      outcome = { exitCode: 0 };
    }
  } catch (err) {
    outcome = { error: err instanceof Error ? err : new Error(String(err)) };
  }
  if (signal.aborted) return; // the client is gone: nobody to tell
  log.debug({ kind: request.kind, container: request.containerId, outcome: "error" in outcome ? outcome.error.message : outcome }, "remote command finished");
  await Promise.all([endAndFlush(channels.stdout), endAndFlush(channels.stderr)]);
  const message = statusMessage(version, request, outcome);
  if (channels.error && message) channels.error.write(message);
  await endAndFlush(channels.error);
}

export async function endAndFlush(stream: Writable | undefined): Promise<void> {
  if (!stream || stream.destroyed) return;
  stream.end();
  await finished(stream, { readable: false }).catch(() => undefined);
}

const CHANNEL_NAMES = new Set<string>(["stdin", "stdout", "stderr", "error", "resize"]);

/**
 * Serves one remote command over a SPDY session: collects the channel
 * streams the client opens (by their `streamtype` header), and once all that
 * `request` needs are there, runs it. The session is closed if they do not
 * all arrive within `streamCreationTimeoutMs`.
 */
export class SpdyRemoteCommand {
  private readonly streams = new Map<ChannelName, SpdyStream>();
  private readonly expected: Set<ChannelName>;
  private readonly abort = new AbortController();
  private started = false;
  private running: Promise<void> = Promise.resolve();
  private session: SpdySession | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly runtime: RemoteCommandRuntime,
    private readonly request: RemoteCommandRequest,
    private readonly version: number,
    private readonly log: Logger,
    private readonly streamCreationTimeoutMs: number,
  ) {
    this.expected = expectedChannels(request, version);
  }

  /** Resolves once the command has finished (after a client left: once it was killed). */
  whenDone(): Promise<void> {
    return this.running;
  }

  attach(session: SpdySession): void {
    this.session = session;
    session.once("close", () => {
      clearTimeout(this.timer);
      this.abort.abort();
    });
    this.timer = setTimeout(() => {
      this.log.info({ missing: [...this.expected].filter((c) => !this.streams.has(c)) }, "client did not open its streams in time");
      session.destroy();
    }, this.streamCreationTimeoutMs);
    this.timer.unref();
  }

  onStream = (stream: SpdyStream): void => {
    const type = stream.headers["streamtype"] ?? "";
    if (this.started || !CHANNEL_NAMES.has(type) || this.streams.has(type as ChannelName)) {
      this.log.debug({ type, streamId: stream.id }, "refusing an unexpected stream");
      stream.reset(RstStatus.REFUSED_STREAM);
      return;
    }
    const name = type as ChannelName;
    stream.on("error", () => undefined);
    // Channels the server only writes to: drain whatever the client sends so the stream can finish.
    if (name !== "stdin" && name !== "resize") stream.resume();
    this.streams.set(name, stream);
    if ([...this.expected].every((c) => this.streams.has(c))) this.running = this.start();
  };

  private async start(): Promise<void> {
    this.started = true;
    clearTimeout(this.timer);
    const channels: CommandChannels = {
      stdin: this.streams.get("stdin"),
      stdout: this.streams.get("stdout"),
      stderr: this.streams.get("stderr"),
      error: this.streams.get("error"),
      resize: this.streams.get("resize"),
    };
    try {
      await runRemoteCommand(this.runtime, this.request, channels, this.version, this.abort.signal, this.log);
    } finally {
      // Half-close what is left (stdin, resize) and let the client hang up after reading everything.
      await Promise.all([endAndFlush(channels.stdin as Writable | undefined), endAndFlush(channels.resize as Writable | undefined)]);
      this.session?.goAway();
    }
  }
}
