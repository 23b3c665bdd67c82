/**
 * SPDY/3.1 frame encoding and an incremental frame parser (no compression,
 * no stream state: see spdy-zlib.ts and spdy.ts).
 *
 * Wire format (big endian):
 *   control frame: 1 bit C=1 | 15 bits version (3) | 16 bits type | 8 bits flags | 24 bits length | payload
 *   data frame:    1 bit C=0 | 31 bits stream id    | 8 bits flags | 24 bits length | payload
 * Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are zlib-compressed name/value
 * lists: u32 count, then per pair u32 name length, name, u32 value length,
 * value (several values of one name are joined by NUL).
 */

export const SPDY_VERSION = 3;
export const FRAME_HEADER_BYTES = 8;
/** The largest payload the 24-bit length field can express. */
export const MAX_FRAME_PAYLOAD = 0xffffff;

export const FrameType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;

export const FLAG_FIN = 0x01;
export const FLAG_UNIDIRECTIONAL = 0x02;

/** RST_STREAM status codes. */
export const RstStatus = {
  PROTOCOL_ERROR: 1,
  INVALID_STREAM: 2,
  REFUSED_STREAM: 3,
  UNSUPPORTED_VERSION: 4,
  CANCEL: 5,
  INTERNAL_ERROR: 6,
  FLOW_CONTROL_ERROR: 7,
  STREAM_IN_USE: 8,
  STREAM_ALREADY_CLOSED: 9,
  FRAME_TOO_LARGE: 11,
} as const;

export const GoAwayStatus = { OK: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2 } as const;

export const SETTINGS_INITIAL_WINDOW_SIZE = 7;

export type Frame =
  | { kind: "data"; streamId: number; flags: number; data: Buffer }
  | { kind: "syn_stream"; streamId: number; associatedTo: number; priority: number; flags: number; headerBlock: Buffer }
  | { kind: "syn_reply"; streamId: number; flags: number; headerBlock: Buffer }
  | { kind: "headers"; streamId: number; flags: number; headerBlock: Buffer }
  | { kind: "rst_stream"; streamId: number; status: number }
  | { kind: "settings"; flags: number; entries: { flags: number; id: number; value: number }[] }
  | { kind: "ping"; id: number }
  | { kind: "goaway"; lastGoodStreamId: number; status: number }
  | { kind: "window_update"; streamId: number; delta: number }
  /** A control frame of a type this server does not use; ignored as the spec asks. */
  | { kind: "unknown"; type: number; flags: number };

/** A violation of the framing rules: the session must end with GOAWAY(PROTOCOL_ERROR). */
export class SpdyProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SpdyProtocolError";
  }
}

// ---- encoding ---------------------------------------------------------

function controlFrame(type: number, flags: number, payload: Buffer): Buffer {
  if (payload.length > MAX_FRAME_PAYLOAD) throw new RangeError(`SPDY control frame payload of ${payload.length} bytes is too large`);
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  frame.writeUInt16BE(type, 2);
  frame.writeUInt32BE(((flags & 0xff) << 24) | payload.length, 4);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

function checkStreamId(streamId: number): void {
  if (!Number.isInteger(streamId) || streamId < 0 || streamId > 0x7fffffff) throw new RangeError(`invalid SPDY stream id ${streamId}`);
}

/** The 8-byte header of a data frame carrying `length` bytes (sent before the payload, uncopied). */
export function encodeDataHeader(streamId: number, length: number, flags = 0): Buffer {
  checkStreamId(streamId);
  if (length > MAX_FRAME_PAYLOAD) throw new RangeError(`SPDY data frame payload of ${length} bytes is too large`);
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt32BE(streamId & 0x7fffffff, 0);
  header.writeUInt32BE(((flags & 0xff) << 24) | length, 4);
  return header;
}

export function encodeData(streamId: number, data: Buffer, flags = 0): Buffer {
  checkStreamId(streamId);
  if (data.length > MAX_FRAME_PAYLOAD) throw new RangeError(`SPDY data frame payload of ${data.length} bytes is too large`);
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + data.length);
  frame.writeUInt32BE(streamId & 0x7fffffff, 0);
  frame.writeUInt32BE(((flags & 0xff) << 24) | data.length, 4);
  data.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

export function encodeSynStream(streamId: number, headerBlock: Buffer, flags = 0, associatedTo = 0, priority = 0): Buffer {
  checkStreamId(streamId);
  const payload = Buffer.allocUnsafe(10 + headerBlock.length);
  payload.writeUInt32BE(streamId, 0);
  payload.writeUInt32BE(associatedTo & 0x7fffffff, 4);
  payload[8] = (priority & 0x7) << 5;
  payload[9] = 0; // slot
  headerBlock.copy(payload, 10);
  return controlFrame(FrameType.SYN_STREAM, flags, payload);
}

function streamAndBlock(type: number, streamId: number, headerBlock: Buffer, flags: number): Buffer {
  checkStreamId(streamId);
  const payload = Buffer.allocUnsafe(4 + headerBlock.length);
  payload.writeUInt32BE(streamId, 0);
  headerBlock.copy(payload, 4);
  return controlFrame(type, flags, payload);
}

export const encodeSynReply = (streamId: number, headerBlock: Buffer, flags = 0) =>
  streamAndBlock(FrameType.SYN_REPLY, streamId, headerBlock, flags);
export function encodeRstStream(streamId: number, status: number): Buffer {
  checkStreamId(streamId);
  const payload = Buffer.allocUnsafe(8);
  payload.writeUInt32BE(streamId, 0);
  payload.writeUInt32BE(status >>> 0, 4);
  return controlFrame(FrameType.RST_STREAM, 0, payload);
}

export function encodeSettings(entries: { flags?: number; id: number; value: number }[], flags = 0): Buffer {
  const payload = Buffer.allocUnsafe(4 + 8 * entries.length);
  payload.writeUInt32BE(entries.length, 0);
  entries.forEach((e, i) => {
    payload.writeUInt32BE((((e.flags ?? 0) & 0xff) << 24) | (e.id & 0xffffff), 4 + 8 * i);
    payload.writeUInt32BE(e.value >>> 0, 8 + 8 * i);
  });
  return controlFrame(FrameType.SETTINGS, flags, payload);
}

export function encodePing(id: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(id >>> 0, 0);
  return controlFrame(FrameType.PING, 0, payload);
}

export function encodeGoAway(lastGoodStreamId: number, status: number): Buffer {
  checkStreamId(lastGoodStreamId);
  const payload = Buffer.allocUnsafe(8);
  payload.writeUInt32BE(lastGoodStreamId, 0);
  payload.writeUInt32BE(status >>> 0, 4);
  return controlFrame(FrameType.GOAWAY, 0, payload);
}

export function encodeWindowUpdate(streamId: number, delta: number): Buffer {
  checkStreamId(streamId);
  if (!Number.isInteger(delta) || delta < 1 || delta > 0x7fffffff) throw new RangeError(`invalid SPDY window delta ${delta}`);
  const payload = Buffer.allocUnsafe(8);
  payload.writeUInt32BE(streamId, 0);
  payload.writeUInt32BE(delta, 4);
  return controlFrame(FrameType.WINDOW_UPDATE, 0, payload);
}

// ---- header blocks (uncompressed) -------------------------------------

/** Header names are lower case on the wire; several values of one name are NUL-joined. */
export type SpdyHeaders = Record<string, string>;

export function encodeHeaderBlock(headers: SpdyHeaders): Buffer {
  const parts: Buffer[] = [];
  const entries = Object.entries(headers);
  const count = Buffer.allocUnsafe(4);
  count.writeUInt32BE(entries.length, 0);
  parts.push(count);
  for (const [name, value] of entries) {
    for (const text of [name.toLowerCase(), value]) {
      const bytes = Buffer.from(text, "utf8");
      const len = Buffer.allocUnsafe(4);
      len.writeUInt32BE(bytes.length, 0);
      parts.push(len, bytes);
    }
  }
  return Buffer.concat(parts);
}

/** Parses an uncompressed name/value block; rejects truncated, empty or duplicate names. */
export function decodeHeaderBlock(block: Buffer): SpdyHeaders {
  let offset = 0;
  const u32 = (what: string): number => {
    if (offset + 4 > block.length) throw new SpdyProtocolError(`header block truncated in ${what}`);
    const v = block.readUInt32BE(offset);
    offset += 4;
    return v;
  };
  const text = (what: string): string => {
    const len = u32(`${what} length`);
    if (offset + len > block.length) throw new SpdyProtocolError(`header block truncated in ${what}`);
    const s = block.toString("utf8", offset, offset + len);
    offset += len;
    return s;
  };
  const count = u32("pair count");
  // Each pair takes at least 8 bytes: a count beyond that is a lie.
  if (count > (block.length - 4) / 8) throw new SpdyProtocolError(`header block claims ${count} pairs in ${block.length} bytes`);
  const headers: SpdyHeaders = Object.create(null) as SpdyHeaders;
  for (let i = 0; i < count; i++) {
    const name = text("name").toLowerCase();
    if (!name) throw new SpdyProtocolError("header block has an empty header name");
    if (Object.prototype.hasOwnProperty.call(headers, name)) throw new SpdyProtocolError(`header block repeats header ${name}`);
    headers[name] = text("value");
  }
  if (offset !== block.length) throw new SpdyProtocolError(`header block has ${block.length - offset} trailing bytes`);
  return headers;
}

// ---- parsing ----------------------------------------------------------

export interface ParserLimits {
  /** Largest control frame payload accepted (header blocks are small). */
  maxControlPayload: number;
  /** Largest data frame payload accepted. */
  maxDataPayload: number;
  /**
   * Vets a data frame from its header alone, before its payload is buffered:
   * false makes it a protocol error (garbage that happens to parse as a huge
   * data frame for a stream nobody opened is refused at once).
   */
  acceptData?: (streamId: number, length: number) => boolean;
  /**
   * Told of each SYN_STREAM as soon as it is parsed, before the frames after
   * it in the same chunk are vetted: a peer may send a stream's SYN_STREAM
   * and its first data in one write (and a proxy such as kubelet's merges
   * writes), so acceptData must already know the stream.
   */
  announced?: (streamId: number) => void;
}

export const DEFAULT_LIMITS: ParserLimits = { maxControlPayload: 256 * 1024, maxDataPayload: MAX_FRAME_PAYLOAD };

/**
 * Incremental parser: push() bytes as they arrive (split anywhere), get back
 * the complete frames. Throws SpdyProtocolError on anything malformed; the
 * caller then ends the session.
 */
export class SpdyFrameParser {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(private readonly limits: ParserLimits = DEFAULT_LIMITS) {}

  get bufferedBytes(): number {
    return this.buffered;
  }

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    while (this.buffered >= FRAME_HEADER_BYTES) {
      const header = this.peek(FRAME_HEADER_BYTES);
      const length = header.readUInt32BE(4) & 0xffffff;
      const isControl = (header[0]! & 0x80) !== 0;
      const limit = isControl ? this.limits.maxControlPayload : this.limits.maxDataPayload;
      if (length > limit) {
        throw new SpdyProtocolError(`${isControl ? "control" : "data"} frame of ${length} bytes exceeds the limit of ${limit}`);
      }
      if (!isControl && this.limits.acceptData && !this.limits.acceptData(header.readUInt32BE(0) & 0x7fffffff, length)) {
        throw new SpdyProtocolError(`data frame for stream ${header.readUInt32BE(0) & 0x7fffffff}, which was never opened`);
      }
      if (this.buffered < FRAME_HEADER_BYTES + length) break;
      const frame = this.take(FRAME_HEADER_BYTES + length);
      const parsed = parseFrame(frame.subarray(0, FRAME_HEADER_BYTES), frame.subarray(FRAME_HEADER_BYTES));
      if (parsed.kind === "syn_stream") this.limits.announced?.(parsed.streamId);
      frames.push(parsed);
    }
    return frames;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  private take(n: number): Buffer {
    let out: Buffer;
    if (this.chunks[0]!.length >= n) {
      out = this.chunks[0]!.subarray(0, n);
    } else {
      const joined = Buffer.concat(this.chunks);
      this.chunks = [joined];
      out = joined.subarray(0, n);
    }
    const first = this.chunks[0]!;
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return out;
  }
}

function parseFrame(header: Buffer, payload: Buffer): Frame {
  const flags = header[4]!;
  if ((header[0]! & 0x80) === 0) {
    return { kind: "data", streamId: header.readUInt32BE(0) & 0x7fffffff, flags, data: payload };
  }
  const version = header.readUInt16BE(0) & 0x7fff;
  if (version !== SPDY_VERSION) throw new SpdyProtocolError(`unsupported SPDY version ${version}`);
  const type = header.readUInt16BE(2);
  const need = (n: number, name: string) => {
    if (payload.length < n) throw new SpdyProtocolError(`${name} frame of ${payload.length} bytes is too short`);
  };
  const exact = (n: number, name: string) => {
    if (payload.length !== n) throw new SpdyProtocolError(`${name} frame must be ${n} bytes, got ${payload.length}`);
  };
  const streamId = () => payload.readUInt32BE(0) & 0x7fffffff;
  switch (type) {
    case FrameType.SYN_STREAM:
      need(10, "SYN_STREAM");
      return {
        kind: "syn_stream",
        streamId: streamId(),
        associatedTo: payload.readUInt32BE(4) & 0x7fffffff,
        priority: payload[8]! >> 5,
        flags,
        headerBlock: payload.subarray(10),
      };
    case FrameType.SYN_REPLY:
      need(4, "SYN_REPLY");
      return { kind: "syn_reply", streamId: streamId(), flags, headerBlock: payload.subarray(4) };
    case FrameType.HEADERS:
      need(4, "HEADERS");
      return { kind: "headers", streamId: streamId(), flags, headerBlock: payload.subarray(4) };
    case FrameType.RST_STREAM:
      exact(8, "RST_STREAM");
      return { kind: "rst_stream", streamId: streamId(), status: payload.readUInt32BE(4) };
    case FrameType.SETTINGS: {
      need(4, "SETTINGS");
      const count = payload.readUInt32BE(0);
      if (payload.length !== 4 + 8 * count) throw new SpdyProtocolError(`SETTINGS frame claims ${count} entries in ${payload.length} bytes`);
      const entries = [];
      for (let i = 0; i < count; i++) {
        const word = payload.readUInt32BE(4 + 8 * i);
        entries.push({ flags: word >>> 24, id: word & 0xffffff, value: payload.readUInt32BE(8 + 8 * i) });
      }
      return { kind: "settings", flags, entries };
    }
    case FrameType.PING:
      exact(4, "PING");
      return { kind: "ping", id: payload.readUInt32BE(0) };
    case FrameType.GOAWAY:
      exact(8, "GOAWAY");
      return { kind: "goaway", lastGoodStreamId: streamId(), status: payload.readUInt32BE(4) };
    case FrameType.WINDOW_UPDATE:
      exact(8, "WINDOW_UPDATE");
      return { kind: "window_update", streamId: streamId(), delta: payload.readUInt32BE(4) & 0x7fffffff };
    default:
      return { kind: "unknown", type, flags };
  }
}
