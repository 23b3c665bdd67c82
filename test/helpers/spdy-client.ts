/**
 * A minimal SPDY/3.1 client for tests: opens streams, sends frames (also
 * malformed ones, as raw bytes) and collects what the server sends back,
 * decoded. Built on the project's own framing so unit tests can drive a
 * session frame by frame; integration tests use it against the real server.
 */
import { Duplex, PassThrough } from "node:stream";
import { connect, type Socket } from "node:net";
import {
  FLAG_FIN,
  SpdyFrameParser,
  decodeHeaderBlock,
  encodeData,
  encodeHeaderBlock,
  encodeSynStream,
  type Frame,
  type SpdyHeaders,
} from "../../src/streaming/spdy-frames.ts";
import { HeaderCompressor, HeaderDecompressor } from "../../src/streaming/spdy-zlib.ts";
import { readUpgradeResponse } from "./upgrade-response.ts";

export type DecodedFrame = Frame & { headers?: SpdyHeaders };

/** Two connected in-memory Duplex ends. */
export function duplexPair(): [Duplex, Duplex] {
  const aToB = new PassThrough();
  const bToA = new PassThrough();
  const make = (readable: PassThrough, writable: PassThrough) =>
    new Duplex({
      read() {
        readable.resume();
      },
      write(chunk, _enc, cb) {
        if (writable.destroyed) return cb();
        writable.write(chunk, cb);
      },
      final(cb) {
        writable.end();
        cb();
      },
      destroy(err, cb) {
        writable.destroy();
        readable.destroy();
        cb(err);
      },
    });
  const a = make(bToA, aToB);
  const b = make(aToB, bToA);
  bToA.on("data", (c) => a.push(c));
  bToA.on("end", () => a.push(null));
  aToB.on("data", (c) => b.push(c));
  aToB.on("end", () => b.push(null));
  bToA.on("close", () => a.destroy());
  aToB.on("close", () => b.destroy());
  return [a, b];
}

export class SpdyTestClient {
  readonly frames: DecodedFrame[] = [];
  private readonly parser = new SpdyFrameParser();
  private readonly compressor = new HeaderCompressor();
  private readonly decompressor = new HeaderDecompressor();
  private nextId = 1;
  private chain: Promise<void> = Promise.resolve();
  private waiters: (() => void)[] = [];
  closed = false;
  /** Raw bytes received after the HTTP response head (when `connectHttp` was used). */

  constructor(readonly socket: Duplex) {
    socket.on("data", (chunk: Buffer) => this.onBytes(chunk));
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => undefined);
  }

  /** A client on a socket whose upgrade response was already read; `rest` = the SPDY bytes read with it. */
  static adopt(socket: Duplex, rest: Buffer): SpdyTestClient {
    const client = new SpdyTestClient(socket);
    if (rest.length > 0) client.onBytes(rest);
    return client;
  }

  /** Connects to `url` (http://host:port/path), upgrades to SPDY/3.1 and resolves with the response head and the client. */
  static async connectHttp(url: string, protocols: string[], extraHeaders = ""): Promise<{ status: number; head: string; client?: SpdyTestClient; socket: Socket }> {
    const u = new URL(url);
    const socket = connect({ host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port) });
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const versions = protocols.map((p) => `X-Stream-Protocol-Version: ${p}\r\n`).join("");
    socket.write(`POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n${versions}${extraHeaders}Content-Length: 0\r\n\r\n`);
    const { head, status, rest } = await readUpgradeResponse(socket);
    if (status !== 101) return { status, head, socket };
    const client = SpdyTestClient.adopt(socket, rest);
    return { status, head, client, socket };
  }

  private onBytes(chunk: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.parser.push(chunk);
    } catch (err) {
      this.frames.push({ kind: "unknown", type: -1, flags: 0 });
      return;
    }
    for (const frame of frames) {
      this.chain = this.chain.then(async () => {
        const decoded: DecodedFrame = { ...frame };
        if ("headerBlock" in frame) decoded.headers = decodeHeaderBlock(await this.decompressor.decompress(frame.headerBlock));
        this.frames.push(decoded);
        this.wake();
      });
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Waits until `predicate` holds over the frames received so far (or the connection closed). */
  async waitFor(predicate: (frames: DecodedFrame[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.frames)) {
      if (this.closed) throw new Error(`connection closed; frames: ${this.describe()}`);
      if (Date.now() > deadline) throw new Error(`timed out; frames: ${this.describe()}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  async waitClosed(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error("the server did not close the connection");
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  describe(): string {
    return this.frames.map((f) => `${f.kind}${"streamId" in f ? `#${f.streamId}` : ""}`).join(",");
  }

  /** Opens a stream; resolves to its id. */
  async open(headers: SpdyHeaders, fin = false): Promise<number> {
    const id = this.nextId;
    this.nextId += 2;
    const block = await this.compressor.compress(encodeHeaderBlock(headers));
    this.socket.write(encodeSynStream(id, block, fin ? FLAG_FIN : 0));
    return id;
  }

  send(streamId: number, data: Buffer | string, fin = false): void {
    this.socket.write(encodeData(streamId, Buffer.from(data), fin ? FLAG_FIN : 0));
  }

  raw(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  /** All data the server sent on `streamId`, and whether it sent FIN. */
  received(streamId: number): { data: Buffer; fin: boolean } {
    const parts: Buffer[] = [];
    let fin = false;
    for (const f of this.frames) {
      if (f.kind === "data" && f.streamId === streamId) {
        parts.push(f.data);
        if (f.flags & FLAG_FIN) fin = true;
      }
    }
    return { data: Buffer.concat(parts), fin };
  }

  close(): void {
    this.compressor.close();
    this.decompressor.close();
    this.socket.destroy();
  }
}
