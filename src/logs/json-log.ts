/**
 * Converts Docker's json-file log lines into CRI records, byte for byte.
 *
 * Docker's json-file driver writes one JSON object per line,
 * `{"log":"<content>","stream":"stdout|stderr","time":"<RFC3339Nano>"}`, in
 * the order its log copier produced the messages. The copier cuts output at
 * each newline and at 16 KiB; a message that ended its line carries the "\n"
 * in `log`, one that Docker cut does not. That maps one-to-one onto CRI's F
 * and P tags, so one entry becomes exactly one record, which is what makes
 * resuming exact (resume counts records, see file-follower.ts).
 *
 * Speed matters here (a container can log tens of MB/s), so the common shape
 * is parsed by hand on the bytes: the content is copied as it is until the
 * first escape, the time is copied and padded to the fixed nine-digit width
 * CRI writers use. Anything else (an `attrs` field, another key order) goes
 * through JSON.parse, and a line that is not an entry at all is counted and
 * skipped, salvaging an entry that follows torn bytes on the same line
 * (Docker appends after a write the disk cut short).
 */

const NL = 0x0a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SPACE = 0x20;
const LOG_PREFIX = Buffer.from('{"log":"');
const STREAM_KEY = Buffer.from(',"stream":"');
const TIME_KEY = Buffer.from(',"time":"');
const STDOUT = Buffer.from("stdout");
const STDERR = Buffer.from("stderr");
/** Runs up to this many bytes are copied byte by byte rather than through TypedArray.set (see copyBytes). */
const SHORT_COPY = 64;
/** Longest header: 35-byte timestamp with zone offset + " stdout F ". */
const MAX_HEADER = 48;

export interface ConvertResult {
  /** Bytes of CRI records placed in `out` from `outStart`. */
  written: number;
  /** Input bytes consumed, from `start`; always ends after a "\n". */
  consumed: number;
  /** Entries written as records. */
  records: number;
  /** Entries dropped because a previous run already wrote them. */
  skipped: number;
  /** Bytes of lines that were not Docker log entries (dropped). */
  malformedBytes: number;
  /** Docker's time of the last entry consumed ("" when none). */
  lastTime: string;
}

export interface ConvertOptions {
  /**
   * More input may follow. A partial entry at the very end is then held back
   * (not consumed) until the next entry shows whether more of its line came.
   */
  more: boolean;
}

/** Stateful only in `skip`: entries still to drop after a resume. */
export class JsonLogConverter {
  constructor(public skip = 0) {}

  /**
   * Converts the complete lines in `input[start, end)` into `out` from
   * `outStart`. Stops early when `out` has no room for the next line; call
   * again with a fresh `out` for the rest.
   */
  convert(input: Buffer, start: number, end: number, out: Buffer, outStart: number, options: ConvertOptions): ConvertResult {
    const result: ConvertResult = { written: 0, consumed: 0, records: 0, skipped: 0, malformedBytes: 0, lastTime: "" };
    let pos = start;
    let w = outStart;
    let lastTimeStart = -1;
    let lastTimeEnd = -1;
    while (pos < end) {
      const nl = input.indexOf(NL, pos);
      if (nl < 0 || nl >= end) break;
      // A converted record is never longer than its line (the JSON keys
      // outweigh the header), except for the padded time: MAX_HEADER covers it.
      if (w + (nl - pos) + MAX_HEADER > out.length) {
        if (w === outStart) throw new RangeError(`output buffer of ${out.length} bytes cannot hold a ${nl - pos}-byte log line`);
        break;
      }
      const entry = parseFast(input, pos, nl) ?? parseSlow(input, pos, nl);
      if (!entry) {
        result.malformedBytes += nl + 1 - pos;
        pos = nl + 1;
        continue;
      }
      if (entry.salvagedFrom > pos) result.malformedBytes += entry.salvagedFrom - pos;
      let partial = entry.partial;
      if (partial && this.skip === 0) {
        const next = input.indexOf(NL, nl + 1);
        // Without more input a partial entry at the very end stays P: the
        // output ended mid-line, and a reader must not add a newline the
        // container never wrote (kubelet reads a FallbackToLogsOnError
        // termination message byte for byte; containerd writes P here too).
        if ((next < 0 || next >= end) && options.more) break;
      }
      pos = nl + 1;
      if (entry.timeBytes) {
        lastTimeStart = entry.timeStart;
        lastTimeEnd = entry.timeEnd;
      } else {
        lastTimeStart = -1;
        result.lastTime = entry.time;
      }
      if (this.skip > 0) {
        this.skip--;
        result.skipped++;
        continue;
      }
      w = writeRecord(input, entry, out, w, partial);
      result.records++;
    }
    if (lastTimeStart >= 0) result.lastTime = input.toString("latin1", lastTimeStart, lastTimeEnd);
    result.written = w - outStart;
    result.consumed = pos - start;
    return result;
  }
}

interface Entry {
  stream: Buffer;
  partial: boolean;
  /** Time as bytes of the input (fast path) or as a string (slow path). */
  timeBytes: boolean;
  timeStart: number;
  timeEnd: number;
  time: string;
  /** Content: input bytes [contentStart, contentEnd) with escapes from firstEscape (fast path), or decoded. */
  contentStart: number;
  contentEnd: number;
  firstEscape: number;
  decoded: Buffer | undefined;
  /** Where the entry's JSON begins (after torn bytes). */
  salvagedFrom: number;
}

/** The shape Docker's json-file driver writes, or undefined. */
function parseFast(b: Buffer, s: number, nl: number): Entry | undefined {
  for (let i = 0; i < 8; i++) if (b[s + i] !== LOG_PREFIX[i]) return undefined;
  const cs = s + 8;
  let i = cs;
  let firstEscape = -1;
  for (;;) {
    if (i >= nl) return undefined;
    const c = b[i]!;
    if (c === QUOTE) break;
    if (c === BACKSLASH) {
      if (firstEscape < 0) firstEscape = i;
      i += 2;
    } else i++;
  }
  const ce = i;
  let p = ce + 1;
  for (let k = 0; k < 11; k++) if (b[p + k] !== STREAM_KEY[k]) return undefined;
  p += 11;
  let stream: Buffer;
  if (b[p] === 0x73 && b[p + 1] === 0x74 && b[p + 2] === 0x64 && b[p + 6] === QUOTE) {
    if (b[p + 3] === 0x6f && b[p + 4] === 0x75 && b[p + 5] === 0x74) stream = STDOUT;
    else if (b[p + 3] === 0x65 && b[p + 4] === 0x72 && b[p + 5] === 0x72) stream = STDERR;
    else return undefined;
  } else return undefined;
  p += 7;
  for (let k = 0; k < 9; k++) if (b[p + k] !== TIME_KEY[k]) return undefined;
  p += 9;
  // `"}` closes the line; the time is what lies between.
  if (b[nl - 1] !== 0x7d || b[nl - 2] !== QUOTE) return undefined;
  const ts = p;
  const te = nl - 2;
  if (te - ts < 20 || te - ts > 35 || b[ts + 10] !== 0x54) return undefined;
  // The line's own "\n" (escaped as \n at the very end) makes it an F entry.
  let partial = true;
  let contentEnd = ce;
  if (firstEscape >= 0 && b[ce - 2] === BACKSLASH && b[ce - 1] === 0x6e && endsWithUnescaped(b, firstEscape, ce - 2)) {
    partial = false;
    contentEnd = ce - 2;
    if (firstEscape === ce - 2) firstEscape = -1;
  }
  return { stream, partial, timeBytes: true, timeStart: ts, timeEnd: te, time: "", contentStart: cs, contentEnd, firstEscape, decoded: undefined, salvagedFrom: s };
}

/** Whether the backslash at `at` starts an escape (is not itself escaped), scanning escapes from `from`. */
function endsWithUnescaped(b: Buffer, from: number, at: number): boolean {
  let i = from;
  while (i < at) i += b[i] === BACKSLASH ? 2 : 1;
  return i === at;
}

/** Any other JSON shape Docker may write, or an entry behind torn bytes. */
function parseSlow(b: Buffer, s: number, nl: number): Entry | undefined {
  const whole = parseJsonEntry(b.toString("utf8", s, nl));
  if (whole) return { ...whole, salvagedFrom: s };
  // Torn bytes, then a whole entry: salvage the entry.
  const again = b.lastIndexOf(LOG_PREFIX, nl);
  if (again > s) {
    const entry = parseFast(b, again, nl) ?? parseJsonEntry(b.toString("utf8", again, nl));
    if (entry) return { ...entry, salvagedFrom: again };
  }
  return undefined;
}

function parseJsonEntry(text: string): Entry | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const { log, stream, time } = value as Record<string, unknown>;
  if (typeof log !== "string" || (stream !== "stdout" && stream !== "stderr") || typeof time !== "string") return undefined;
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)$/.test(time)) return undefined;
  const partial = !log.endsWith("\n");
  const decoded = Buffer.from(partial ? log : log.slice(0, -1), "utf8");
  return {
    stream: stream === "stdout" ? STDOUT : STDERR,
    partial,
    timeBytes: false,
    timeStart: 0,
    timeEnd: 0,
    time,
    contentStart: 0,
    contentEnd: 0,
    firstEscape: -1,
    decoded,
    salvagedFrom: 0,
  };
}

function writeRecord(b: Buffer, e: Entry, out: Buffer, w: number, partial: boolean): number {
  w = e.timeBytes ? writeTime(b, e.timeStart, e.timeEnd, out, w) : writeTime(Buffer.from(e.time, "latin1"), 0, e.time.length, out, w);
  out[w++] = SPACE;
  w = copyBytes(e.stream, 0, e.stream.length, out, w);
  out[w++] = SPACE;
  out[w++] = partial ? 0x50 : 0x46;
  out[w++] = SPACE;
  if (e.decoded) {
    w = copyBytes(e.decoded, 0, e.decoded.length, out, w);
  } else if (e.firstEscape < 0) {
    w = copyBytes(b, e.contentStart, e.contentEnd, out, w);
  } else {
    w = copyBytes(b, e.contentStart, e.firstEscape, out, w);
    w = unescapeInto(b, e.firstEscape, e.contentEnd, out, w);
  }
  out[w++] = NL;
  return w;
}

/**
 * Copies src[from, to) into out at w and returns the new end. Log lines are
 * mostly short, and Buffer.copy's way into native code cost more than the
 * bytes it moved (a quarter of the conversion's CPU in a profile): short runs
 * are copied here, long ones with TypedArray.set.
 */
function copyBytes(src: Buffer, from: number, to: number, out: Buffer, w: number): number {
  const n = to - from;
  if (n > SHORT_COPY) {
    out.set(src.subarray(from, to), w);
    return w + n;
  }
  for (let i = from; i < to; i++) out[w++] = src[i]!;
  return w;
}

/** Copies an RFC 3339 time, padding the fraction to nine digits (CRI's fixed width). */
function writeTime(b: Buffer, ts: number, te: number, out: Buffer, w: number): number {
  // "2006-01-02T15:04:05" is 19 bytes.
  w = copyBytes(b, ts, ts + 19, out, w);
  let i = ts + 19;
  out[w++] = 0x2e;
  let digits = 0;
  if (b[i] === 0x2e) {
    i++;
    while (i < te && b[i]! >= 0x30 && b[i]! <= 0x39 && digits < 9) {
      out[w++] = b[i++]!;
      digits++;
    }
    while (i < te && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
  }
  for (; digits < 9; digits++) out[w++] = 0x30;
  return copyBytes(b, i, te, out, w);
}

/** Decodes JSON string escapes in b[from, to) into out (UTF-8). */
function unescapeInto(b: Buffer, from: number, to: number, out: Buffer, w: number): number {
  let i = from;
  while (i < to) {
    const c = b[i]!;
    if (c !== BACKSLASH) {
      out[w++] = c;
      i++;
      continue;
    }
    const e = b[i + 1];
    i += 2;
    switch (e) {
      case 0x6e: out[w++] = 0x0a; break; // n
      case 0x74: out[w++] = 0x09; break; // t
      case 0x72: out[w++] = 0x0d; break; // r
      case 0x62: out[w++] = 0x08; break; // b
      case 0x66: out[w++] = 0x0c; break; // f
      case 0x75: { // uXXXX, possibly a surrogate pair
        let code = hex4(b, i);
        i += 4;
        if (code >= 0xd800 && code <= 0xdbff && b[i] === BACKSLASH && b[i + 1] === 0x75) {
          const low = hex4(b, i + 2);
          if (low >= 0xdc00 && low <= 0xdfff) {
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            i += 6;
          }
        }
        w = writeCodePoint(code, out, w);
        break;
      }
      default: out[w++] = e ?? BACKSLASH; // \" \\ \/
    }
  }
  return w;
}

function hex4(b: Buffer, i: number): number {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = b[i + k] ?? 0;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (d < 0) return 0xfffd;
    v = v * 16 + d;
  }
  return v;
}

function writeCodePoint(code: number, out: Buffer, w: number): number {
  // A lone surrogate has no UTF-8 form; U+FFFD is what encoders write for it.
  if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
  if (code < 0x80) {
    out[w++] = code;
  } else if (code < 0x800) {
    out[w++] = 0xc0 | (code >> 6);
    out[w++] = 0x80 | (code & 0x3f);
  } else if (code < 0x10000) {
    out[w++] = 0xe0 | (code >> 12);
    out[w++] = 0x80 | ((code >> 6) & 0x3f);
    out[w++] = 0x80 | (code & 0x3f);
  } else {
    out[w++] = 0xf0 | (code >> 18);
    out[w++] = 0x80 | ((code >> 12) & 0x3f);
    out[w++] = 0x80 | ((code >> 6) & 0x3f);
    out[w++] = 0x80 | (code & 0x3f);
  }
  return w;
}
