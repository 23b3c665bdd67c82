/**
 * One SPDY/3.1 stream as a Duplex: the readable side is the peer's data, the
 * writable side becomes data frames (end() = FIN). It holds only per-stream
 * state (window, half-close flags); framing, flow control across the session
 * and the socket belong to the session behind StreamSink (spdy.ts).
 */
import { Duplex } from "node:stream";
import { RstStatus, type SpdyHeaders } from "./spdy-frames.ts";

/** What a stream needs of its session. */
export interface StreamSink {
  /** The initial receive window; credit is returned once half of it is consumed. */
  readonly initialWindow: number;
  grantWindow(streamId: number, delta: number): void;
  consumerReady(stream: SpdyStream): void;
  sendData(stream: SpdyStream, data: Buffer, fin: boolean): Promise<void>;
  sendReset(stream: SpdyStream, status: number): void;
  forget(stream: SpdyStream): void;
}

export class SpdyStream extends Duplex {
  /** Bytes we may still send (only enforced for flow-controlling peers). */
  sendWindow: number;
  private uncredited = 0;
  remoteEnded = false;
  private localEnded = false;
  /** Set when the peer reset the stream. */
  resetByPeer = false;

  constructor(
    readonly id: number,
    readonly headers: SpdyHeaders,
    private readonly session: StreamSink,
    initialWindow: number,
  ) {
    super({ allowHalfOpen: true, readableHighWaterMark: 256 * 1024, writableHighWaterMark: 256 * 1024 });
    this.sendWindow = initialWindow;
    // A write racing the session's end fails; that is the peer leaving, not a bug, and an
    // unheard 'error' event would take the whole server down.
    this.on("error", () => undefined);
  }

  /** Delivers peer data; false when the consumer is full. */
  deliver(data: Buffer): boolean {
    this.uncredited += data.length;
    const more = this.push(data);
    if (more) this.credit();
    return more;
  }

  deliverEnd(): void {
    this.remoteEnded = true;
    this.push(null);
  }

  private credit(): void {
    if (this.uncredited >= this.session.initialWindow / 2) {
      this.session.grantWindow(this.id, this.uncredited);
      this.uncredited = 0;
    }
  }

  override _read(): void {
    this.credit();
    this.session.consumerReady(this);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.session.sendData(this, chunk, false).then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.localEnded = true;
    this.session.sendData(this, Buffer.alloc(0), true).then(() => callback(), callback);
  }

  /** Aborts the stream: RST_STREAM(CANCEL) to the peer. */
  reset(status: number = RstStatus.CANCEL): void {
    if (!this.destroyed) this.session.sendReset(this, status);
    this.destroy();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A stream destroyed before both sides finished is cancelled, so the peer does not wait on it.
    if (!this.resetByPeer && !(this.localEnded && this.remoteEnded)) this.session.sendReset(this, RstStatus.CANCEL);
    this.session.forget(this);
    callback(error);
  }
}
