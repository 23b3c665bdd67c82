/**
 * The buffers between Docker's json-file log and the CRI file: one read of
 * Docker's file into `input`, the complete entries in it converted into
 * `output` (json-log.ts), and one write of the records per conversion. What
 * a read leaves incomplete (a line Docker is still writing) is kept as the
 * carry at the start of `input` for the next read.
 *
 * Split from the follower (file-follower.ts), which decides when to read;
 * this decides how much is read and what is written of it.
 */
import type { Logger } from "../log.ts";
import { JsonLogConverter } from "./json-log.ts";
import type { JsonLogTail } from "./json-tail.ts";

/**
 * Reads start this large and grow to READ_SIZE once a read fills the buffer
 * (output flowing faster than small reads keep up with). Most containers log
 * little; two 1 MiB buffers for each, allocated outside V8's heap, cost every
 * container start an mmap and its page faults, and forty of them made V8
 * run full collections for the external memory alone.
 *
 * Neither buffer exists before it is needed: the input once a read finds
 * bytes, the output at the first entry to convert. A container that prints
 * nothing holds no buffer at all: its reads borrow one of the spare first
 * buffers below and give it back when they find nothing. Made with each
 * follower, the output buffers were V8 external memory, which hastens its
 * collections (2.4 MB for 30 pods, the largest native item of a heap
 * snapshot after a 30-pod burst), and under Deno, which zeroes a new
 * buffer, resident (3.8 MB for forty).
 *
 * Every buffer here is the pump's own (Buffer.allocUnsafeSlow), never a
 * slice of Node's shared pool: Node 26's pool slabs are 64 KiB and serve
 * every request under 32 KiB, so a 16 KiB input held for the life of a
 * container kept a whole slab resident with it. After 110 silent pods that
 * was 110 inputs pinning about 45 slabs, 2.9 MB (a heap snapshot of the
 * executable; on Node 20 the pool was 8 KiB and 16 KiB was outside it).
 */
const FIRST_READ_SIZE = 16 * 1024;
const READ_SIZE = 1 << 20;
/**
 * The output's room beyond the input's length. A record is never longer
 * than its JSON line (the keys outweigh CRI's header) except for the time,
 * padded to nine digits, which the converter's MAX_HEADER covers for the
 * line it is about to write; so input length plus this converts a whole
 * read in one pass, and a longer output would only be held, never written.
 * Were a record ever longer, the converter stops early and the pump writes
 * the rest in another pass.
 */
const OUT_SLACK = 4 * 1024;
/** Spare first buffers kept for reads of pumps that hold none; more made meanwhile are dropped. */
const SPARE_FIRST_BUFFERS = 4;
const spareFirstBuffers: Buffer[] = [];

/**
 * How the bytes handed over end: "more" while the file may grow (an
 * incomplete last line waits), "file-end" when Docker rotated the file away,
 * "output-end" when no more output can come (the last line is flushed).
 */
export type PumpPhase = "more" | "file-end" | "output-end";

/**
 * Receives each conversion's records. `unread` is how many bytes read from
 * Docker's file are not converted yet, so the Docker position the records
 * reach is the tail's position minus `unread` (JsonLogTail.position).
 */
export type RecordSink = (records: Buffer, unread: number) => Promise<void>;

export interface JsonLogPumpOptions {
  sink: RecordSink;
  logger: Logger;
}

/** What one pull read. */
export interface Pulled {
  /** Bytes read from Docker's file; 0 at its end. */
  bytes: number;
  /** The read filled the free space: more is waiting. */
  filled: boolean;
}

export class JsonLogPump {
  private converter = new JsonLogConverter();
  private input: Buffer = NO_BUFFER;
  private output: Buffer = NO_BUFFER;
  /** Bytes at the start of `input` read but not consumed yet (a line still incomplete or held). */
  private carry = 0;
  /** Docker's time of the last entry converted ("" before the first). */
  lastTime = "";
  /** Docker's log file, for the warnings. */
  private source = "";

  constructor(private readonly options: JsonLogPumpOptions) {}

  /**
   * Starts over on a newly positioned tail of `source`, passing over the
   * first `skip` entries (their records are in the CRI file already).
   */
  restart(source: string, skip: number): void {
    this.source = source;
    this.converter = new JsonLogConverter(skip);
  }

  /** Entries still to pass over (resume); 0 once the written ones are behind. */
  get skip(): number {
    return this.converter.skip;
  }

  /** The bytes of buffer memory this pump keeps alive (for tests and diagnostics): whole backing stores, a pool slab included. */
  get bufferBytes(): number {
    return this.input.buffer.byteLength + this.output.buffer.byteLength;
  }

  /** Stops passing over entries: what is left to skip is not in Docker's log. */
  endSkip(): void {
    this.converter.skip = 0;
  }

  /** Reads what Docker's file has past the carry, and converts and writes its complete entries. */
  async pull(tail: JsonLogTail): Promise<Pulled> {
    const borrowed = this.input.length === 0;
    if (borrowed) this.input = spareFirstBuffers.pop() ?? Buffer.allocUnsafeSlow(FIRST_READ_SIZE);
    else if (this.carry === this.input.length) this.grow();
    const space = this.input.length - this.carry;
    let bytes = 0;
    try {
      bytes = await tail.read(this.input, this.carry);
    } finally {
      // Nothing to keep: a borrowed buffer goes back (a failed read leaves no carry either).
      if (borrowed && bytes === 0) this.giveBackInput();
    }
    if (bytes === 0) return { bytes, filled: false };
    await this.consume(this.carry + bytes, "more");
    // A full read: more is waiting; read in large steps from now on.
    const filled = bytes === space;
    if (filled && this.input.length < READ_SIZE) this.grow(READ_SIZE);
    return { bytes, filled };
  }

  /** Flushes what a finished file left; an incomplete last line there can never complete. */
  async endOfFile(phase: Exclude<PumpPhase, "more">): Promise<void> {
    if (this.carry > 0) await this.consume(this.carry, phase);
    if (this.carry > 0) {
      this.options.logger.warn({ bytes: this.carry, dockerLog: this.source }, "Docker's log file ends in an incomplete entry; its bytes are dropped");
      this.carry = 0;
    }
  }

  /** Converts and writes the complete lines in input[0, length); keeps the rest as carry. */
  private async consume(length: number, phase: PumpPhase): Promise<void> {
    if (this.output.length < this.input.length + OUT_SLACK) this.output = Buffer.allocUnsafeSlow(this.input.length + OUT_SLACK);
    let pos = 0;
    while (pos < length) {
      const r = this.converter.convert(this.input, pos, length, this.output, 0, { more: phase === "more" });
      pos += r.consumed;
      if (r.lastTime) this.lastTime = r.lastTime;
      if (r.malformedBytes > 0) this.options.logger.warn({ bytes: r.malformedBytes, dockerLog: this.source }, "skipped bytes of Docker's log that are not log entries");
      if (r.consumed === 0) break;
      await this.options.sink(this.output.subarray(0, r.written), length - pos);
    }
    this.input.copy(this.input, 0, pos, length);
    this.carry = length - pos;
  }

  /** A larger input buffer (twice as large, or `size`), keeping the carry; the output follows at the next conversion. The first comes from pull(). */
  private grow(size = this.input.length * 2): void {
    const bigger = Buffer.allocUnsafeSlow(Math.max(size, this.input.length));
    this.input.copy(bigger, 0, 0, this.carry);
    this.input = bigger;
  }

  /** Returns the borrowed first buffer of a read that found nothing. */
  private giveBackInput(): void {
    if (spareFirstBuffers.length < SPARE_FIRST_BUFFERS) spareFirstBuffers.push(this.input);
    this.input = NO_BUFFER;
  }
}

const NO_BUFFER = Buffer.alloc(0);
