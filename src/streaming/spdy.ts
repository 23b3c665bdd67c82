/**
 * A server-side SPDY/3.1 session over an upgraded socket: the peer (crictl,
 * critest, kubelet: all use Go's moby/spdystream) opens streams with
 * SYN_STREAM; each becomes a SpdyStream, a Duplex whose readable side is the
 * peer's data and whose writable side sends data frames (end() = FIN).
 *
 * Flow control: spdystream never sends SETTINGS or WINDOW_UPDATE and never
 * honours windows, so enforcing the 64 KiB initial window against it would
 * stall every stream. Windows are therefore enforced (and granted) only once
 * the peer shows it speaks SPDY/3.1 flow control by sending one of those
 * frames. Against every peer, backpressure is TCP's: the socket is paused
 * while a stream's consumer is full, and writers wait for the socket to drain.
 * A peer that stops reading for longer than writeStallTimeoutMs is dropped.
 */
import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.ts";
import {
  DEFAULT_LIMITS,
  FLAG_FIN,
  FLAG_UNIDIRECTIONAL,
  GoAwayStatus,
  RstStatus,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SpdyFrameParser,
  SpdyProtocolError,
  decodeHeaderBlock,
  encodeDataHeader,
  encodeGoAway,
  encodeHeaderBlock,
  encodePing,
  encodeRstStream,
  encodeSynReply,
  encodeWindowUpdate,
  type Frame,
  type SpdyHeaders,
} from "./spdy-frames.ts";
import { HeaderCompressor, HeaderDecompressor } from "./spdy-zlib.ts";
import { SpdyStream, type StreamSink } from "./spdy-stream.ts";

export { SpdyStream } from "./spdy-stream.ts";

const INITIAL_WINDOW = 64 * 1024;
/** Data frames we send carry at most this much, so streams interleave fairly. */
const MAX_DATA_CHUNK = 64 * 1024;

export interface SpdySessionOptions {
  log: Logger;
  /** Called for each stream the peer opens, after its SYN_REPLY is queued. */
  onStream: (stream: SpdyStream) => void;
  maxControlPayload?: number;
  maxHeaderBlock?: number;
  /** Streams open at once; more are refused with RST_STREAM(REFUSED_STREAM). */
  maxConcurrentStreams?: number;
  /** Drop the peer when it has not read our output for this long (0 = never). */
  writeStallTimeoutMs?: number;
}

export class SpdySession extends EventEmitter implements StreamSink {
  readonly initialWindow = INITIAL_WINDOW;
  private readonly parser: SpdyFrameParser;
  private readonly compressor = new HeaderCompressor();
  private readonly decompressor: HeaderDecompressor;
  private readonly streams = new Map<number, SpdyStream>();
  private readonly blocked = new Set<SpdyStream>();
  private readonly log: Logger;
  private inbox: Frame[] = [];
  private processing = false;
  private lastPeerStreamId = 0;
  /** Highest stream id seen in a parsed SYN_STREAM (frames are parsed before they are handled). */
  private highestAnnouncedStreamId = 0;
  private goneAway = false;
  private closed = false;
  /** True once the peer sent SETTINGS or WINDOW_UPDATE (see the file comment). */
  private flowControlled = false;
  private initialSendWindow = INITIAL_WINDOW;
  private sessionSendWindow = INITIAL_WINDOW;
  private sessionUncredited = 0;
  private windowWaiters: (() => void)[] = [];
  private outbox: (Buffer | Promise<Buffer>)[] = [];
  private flushing = false;
  private drainWaiters: (() => void)[] = [];
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: Duplex,
    private readonly options: SpdySessionOptions,
  ) {
    super();
    this.log = options.log;
    this.parser = new SpdyFrameParser({
      maxControlPayload: options.maxControlPayload ?? DEFAULT_LIMITS.maxControlPayload,
      maxDataPayload: DEFAULT_LIMITS.maxDataPayload,
      // Stream ids only grow: data beyond the last SYN_STREAM (or on stream 0) is garbage.
      acceptData: (streamId) => streamId !== 0 && streamId <= this.highestAnnouncedStreamId,
      announced: (streamId) => (this.highestAnnouncedStreamId = Math.max(this.highestAnnouncedStreamId, streamId)),
    });
    this.decompressor = new HeaderDecompressor(options.maxHeaderBlock);
    socket.on("data", (chunk: Buffer) => this.onBytes(chunk));
    socket.on("drain", () => this.onDrain());
    socket.on("error", (err: Error) => this.log.debug({ err }, "SPDY socket error"));
    socket.on("end", () => this.destroy());
    socket.on("close", () => this.destroy());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** Finishes politely: GOAWAY (the peer processes all frames before acting on it), then waits for the peer to close. */
  goAway(graceMs = 10_000): void {
    if (this.closed || this.goneAway) return;
    this.goneAway = true;
    this.enqueue(encodeGoAway(this.lastPeerStreamId, GoAwayStatus.OK));
    const timer = setTimeout(() => this.destroy(), graceMs);
    timer.unref();
    this.once("close", () => clearTimeout(timer));
  }

  /** Tears the session down at once: all streams closed, socket destroyed. */
  destroy(reason?: Error): void {
    if (this.closed) return;
    this.closed = true;
    if (reason) this.log.info({ err: reason }, "closing SPDY session");
    clearTimeout(this.stallTimer);
    for (const stream of [...this.streams.values()]) stream.destroy();
    this.streams.clear();
    this.compressor.close();
    this.decompressor.close();
    this.socket.destroy();
    for (const wake of [...this.drainWaiters, ...this.windowWaiters]) wake();
    this.drainWaiters = [];
    this.windowWaiters = [];
    this.emit("close");
  }

  private protocolError(err: unknown): void {
    if (this.closed) return;
    this.log.warn({ err }, "SPDY protocol error from the peer; closing the session");
    this.socket.write(encodeGoAway(this.lastPeerStreamId, GoAwayStatus.PROTOCOL_ERROR));
    this.destroy();
  }

  // ---- input ------------------------------------------------------------

  private onBytes(chunk: Buffer): void {
    if (this.closed) return;
    try {
      for (const frame of this.parser.push(chunk)) this.inbox.push(frame);
    } catch (err) {
      this.protocolError(err);
      return;
    }
    if (!this.processing) void this.processInbox();
  }

  private async processInbox(): Promise<void> {
    this.processing = true;
    try {
      while (this.inbox.length > 0 && !this.closed) {
        await this.handle(this.inbox.shift()!);
      }
    } catch (err) {
      this.protocolError(err);
    } finally {
      this.processing = false;
    }
  }

  private async handle(frame: Frame): Promise<void> {
    switch (frame.kind) {
      case "syn_stream":
        return this.onSynStream(frame);
      case "data":
        return this.onData(frame.streamId, frame.data, (frame.flags & FLAG_FIN) !== 0);
      case "rst_stream": {
        const stream = this.streams.get(frame.streamId);
        if (stream) {
          stream.resetByPeer = true;
          stream.emit("reset", frame.status);
          stream.destroy();
        }
        return;
      }
      case "headers":
        // Only to keep the shared zlib stream in step; no protocol here uses trailers.
        await this.decompressor.decompress(frame.headerBlock);
        if (frame.flags & FLAG_FIN) this.onData(frame.streamId, Buffer.alloc(0), true);
        return;
      case "ping":
        // Peer-initiated pings have odd ids (we are the server); answer those, ignore echoes of ours.
        if (frame.id % 2 === 1) this.enqueue(encodePing(frame.id));
        return;
      case "goaway":
        this.goneAway = true;
        if (this.streams.size === 0) this.destroy();
        return;
      case "settings":
        for (const entry of frame.entries) {
          if (entry.id === SETTINGS_INITIAL_WINDOW_SIZE) {
            this.flowControlled = true;
            const delta = entry.value - this.initialSendWindow;
            this.initialSendWindow = entry.value;
            for (const s of this.streams.values()) s.sendWindow += delta;
          }
        }
        return;
      case "window_update":
        this.flowControlled = true;
        if (frame.streamId === 0) this.sessionSendWindow += frame.delta;
        else {
          const stream = this.streams.get(frame.streamId);
          if (stream) stream.sendWindow += frame.delta;
        }
        this.wakeWindowWaiters();
        return;
      case "syn_reply":
        // We never open streams, so a reply is a protocol error.
        throw new SpdyProtocolError(`unexpected SYN_REPLY for stream ${frame.streamId}`);
      case "unknown":
        return;
    }
  }

  private async onSynStream(frame: Extract<Frame, { kind: "syn_stream" }>): Promise<void> {
    // Decompress first, always: the zlib stream is shared by every block.
    const headers = decodeHeaderBlock(await this.decompressor.decompress(frame.headerBlock));
    const id = frame.streamId;
    if (id % 2 === 0 || id <= this.lastPeerStreamId) {
      throw new SpdyProtocolError(`stream id ${id} is not a new odd id (last was ${this.lastPeerStreamId})`);
    }
    this.lastPeerStreamId = id;
    if (this.goneAway) {
      this.enqueue(encodeRstStream(id, RstStatus.REFUSED_STREAM));
      return;
    }
    const max = this.options.maxConcurrentStreams ?? 256;
    if (this.streams.size >= max) {
      this.log.warn({ streamId: id, max }, "refusing a SPDY stream: too many open streams");
      this.enqueue(encodeRstStream(id, RstStatus.REFUSED_STREAM));
      return;
    }
    const stream = new SpdyStream(id, headers, this, this.initialSendWindow);
    this.streams.set(id, stream);
    this.enqueue(this.compressor.compress(encodeHeaderBlock({})).then((block) => encodeSynReply(id, block)));
    if (frame.flags & FLAG_FIN) stream.deliverEnd();
    if (frame.flags & FLAG_UNIDIRECTIONAL) stream.end();
    this.options.onStream(stream);
  }

  private onData(streamId: number, data: Buffer, fin: boolean): void {
    const stream = this.streams.get(streamId);
    if (!stream) {
      // Data racing a reset is normal; answering with RST would be noise.
      return;
    }
    if (stream.remoteEnded) {
      this.enqueue(encodeRstStream(streamId, RstStatus.STREAM_ALREADY_CLOSED));
      return;
    }
    if (data.length > 0) {
      this.sessionUncredited += data.length;
      if (this.flowControlled && this.sessionUncredited >= INITIAL_WINDOW / 2) {
        this.enqueue(encodeWindowUpdate(0, this.sessionUncredited));
        this.sessionUncredited = 0;
      }
      if (!stream.deliver(data)) {
        this.blocked.add(stream);
        this.socket.pause();
      }
    }
    if (fin) stream.deliverEnd();
  }

  /** A stream's consumer wants more: resume reading once no stream is full. */
  consumerReady(stream: SpdyStream): void {
    if (this.blocked.delete(stream) && this.blocked.size === 0 && !this.closed) this.socket.resume();
  }

  grantWindow(streamId: number, delta: number): void {
    if (this.flowControlled && !this.closed && delta > 0) this.enqueue(encodeWindowUpdate(streamId, delta));
  }

  forget(stream: SpdyStream): void {
    this.streams.delete(stream.id);
    if (this.blocked.delete(stream) && this.blocked.size === 0 && !this.closed) this.socket.resume();
    if (this.goneAway && this.streams.size === 0 && !this.closed) {
      // Let queued frames reach the peer before closing.
      this.socket.end();
    }
  }

  // ---- output -----------------------------------------------------------

  sendReset(stream: SpdyStream, status: number): void {
    if (!this.closed) this.enqueue(encodeRstStream(stream.id, status));
  }

  /** Sends `data` on `stream` in frames, honouring windows for flow-controlling peers and socket backpressure. */
  async sendData(stream: SpdyStream, data: Buffer, fin: boolean): Promise<void> {
    let offset = 0;
    do {
      if (this.closed) throw new Error(`SPDY session closed before stream ${stream.id} finished writing`);
      let size = Math.min(data.length - offset, MAX_DATA_CHUNK);
      if (this.flowControlled && size > 0) {
        while (Math.min(stream.sendWindow, this.sessionSendWindow) <= 0) {
          await new Promise<void>((resolve) => this.windowWaiters.push(resolve));
          if (this.closed || stream.destroyed) throw new Error(`SPDY stream ${stream.id} closed while waiting for window`);
        }
        size = Math.min(size, stream.sendWindow, this.sessionSendWindow);
        stream.sendWindow -= size;
        this.sessionSendWindow -= size;
      }
      const last = offset + size >= data.length;
      // Header and payload go out as two writes: the payload is never copied.
      this.enqueue(encodeDataHeader(stream.id, size, fin && last ? FLAG_FIN : 0));
      if (size > 0) this.enqueue(data.subarray(offset, offset + size));
      offset += size;
      await this.writable();
    } while (offset < data.length);
  }

  private wakeWindowWaiters(): void {
    const waiters = this.windowWaiters;
    this.windowWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Queues a frame; frames still being compressed keep their place in line. */
  private enqueue(frame: Buffer | Promise<Buffer>): void {
    if (this.closed) return;
    this.outbox.push(frame);
    if (!this.flushing) void this.flush();
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.outbox.length > 0 && !this.closed) {
        // Cork a run of ready buffers so they leave in one writev.
        this.socket.cork();
        while (this.outbox.length > 0 && Buffer.isBuffer(this.outbox[0]) && !this.closed) {
          if (!this.socket.write(this.outbox.shift() as Buffer)) this.startStallTimer();
        }
        this.socket.uncork();
        if (this.outbox.length === 0 || this.closed) break;
        const frame = await (this.outbox.shift() as Promise<Buffer>);
        if (this.closed) break;
        if (!this.socket.write(frame)) this.startStallTimer();
      }
    } catch (err) {
      this.log.warn({ err }, "SPDY output failed");
      this.destroy();
    } finally {
      this.flushing = false;
    }
  }

  /** Resolves when the socket can take more (immediately unless it is congested). */
  private writable(): Promise<void> {
    const congested = (this.socket as Duplex & { writableNeedDrain?: boolean }).writableNeedDrain;
    if (!congested || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private startStallTimer(): void {
    const limit = this.options.writeStallTimeoutMs ?? 0;
    if (limit <= 0 || this.stallTimer) return;
    this.stallTimer = setTimeout(() => {
      this.destroy(new Error(`the peer did not read for ${limit} ms`));
    }, limit);
    this.stallTimer.unref();
  }

  private onDrain(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }
}
