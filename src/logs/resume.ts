/**
 * Where a log follower resumes after cridock restarts, without losing or
 * repeating a line.
 *
 * Docker's `since` is inclusive (messages with timestamp ≥ since come back)
 * and replays messages in the order of its own log file, the same order every
 * time. Timestamps are not unique (several lines in one tick) and, across
 * stdout and stderr, not even monotonic in file order. So the position is
 * kept as "replay from `since`, skip the first `skip` messages", where `since`
 * lies WINDOW before the newest written timestamp and `skip` counts the
 * written messages at or after `since`: exactly the prefix of that replay
 * already in the CRI file.
 *
 * The position is persisted now and then (and exactly at reopen and stop);
 * records written after it are counted from the CRI file itself, because the
 * file, not the checkpoint, is what must not get a line twice.
 */
import { open, readdir, readFile, rename, unlink, writeFile, mkdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { CridockError } from "../errors.ts";
import { setAside } from "../set-aside.ts";
import type { TailPosition } from "./json-tail.ts";

/** Cross-stream reordering in Docker's log file stays far below this. */
export const WINDOW_NANOS = 1_000_000_000n;

export interface ResumePoint {
  /** Replay from this timestamp (0n: from the start). */
  since: bigint;
  /** Messages of that replay already written. */
  skip: number;
  /** Newest timestamp written; a replayed message far beyond it cannot be a written one. */
  lastNanos: bigint;
}

export const FROM_START: ResumePoint = { since: 0n, skip: 0, lastNanos: 0n };

export interface FollowState {
  containerId: string;
  logPath: string;
  tty: boolean;
  point: ResumePoint;
  /** The CRI file (inode, size) the point refers to. */
  inode: number;
  offset: number;
  /** The container exited and all its output is in the file. */
  done: boolean;
  /**
   * "json-file": read from Docker's json-file log on disk (file-follower.ts);
   * absent or "api": the Docker log stream (follower.ts, `point` applies).
   */
  kind?: "json-file" | "api";
  /** json-file: how far Docker's log was read when the CRI file had `offset` bytes (absent: not started). */
  source?: JsonSourceState;
}

export interface JsonSourceState {
  dockerLogPath: string;
  maxFiles: number;
  position: TailPosition;
  /** Docker's time of the last entry read (for loss reports). */
  lastTime: string;
}

/**
 * Remembers the timestamps of the messages of the current replay that are in
 * the file (written now, or skipped because an earlier run wrote them), in
 * replay order, for as long as a future `since` could reach them.
 */
export class WrittenTracker {
  private ring = new BigInt64Array(1024);
  private head = 0;
  private count = 0;
  private max: bigint;

  /** `since` of the replay the noted messages come from. */
  constructor(private readonly base: bigint = 0n, lastNanos: bigint = 0n) {
    this.max = lastNanos;
  }

  note(nanos: bigint): void {
    if (nanos > this.max) this.max = nanos;
    if (this.count === this.ring.length) this.prune();
    if (this.count === this.ring.length) this.grow();
    this.ring[(this.head + this.count) % this.ring.length] = nanos;
    this.count++;
  }

  /** The position after everything noted so far. */
  point(): ResumePoint {
    const windowStart = this.max > WINDOW_NANOS ? this.max - WINDOW_NANOS : 0n;
    const since = windowStart > this.base ? windowStart : this.base;
    let skip = 0;
    for (let i = 0; i < this.count; i++) {
      if (this.ring[(this.head + i) % this.ring.length]! >= since) skip++;
    }
    return { since, skip, lastNanos: this.max };
  }

  /** Drops entries older than any future `since` (which only moves forward). */
  private prune(): void {
    const floor = this.max - 3n * WINDOW_NANOS;
    while (this.count > 0 && this.ring[this.head]! < floor) {
      this.head = (this.head + 1) % this.ring.length;
      this.count--;
    }
  }

  private grow(): void {
    const bigger = new BigInt64Array(this.ring.length * 2);
    for (let i = 0; i < this.count; i++) bigger[i] = this.ring[(this.head + i) % this.ring.length]!;
    this.ring = bigger;
    this.head = 0;
  }
}

/** A follow state file that exists but cannot be read back (torn by a power loss, or damaged). */
export class UnreadableFollowState extends CridockError {
  constructor(readonly path: string, cause: unknown) {
    super("INTERNAL", `log position ${path} cannot be read`, { cause });
    this.name = "UnreadableFollowState";
  }
}

/**
 * Persisted follow states, one JSON file per container under `<root>/logs`.
 * Each container's follower saves several times over its life and removes
 * its file once: every file operation is a round through libuv's threadpool,
 * so the directory is made once (and again only if it went away), and
 * removal is one unlink per name rather than rm's look first.
 */
export class FollowStateStore {
  private dirMade = false;

  constructor(readonly dir: string) {}

  private file(containerId: string): string {
    return join(this.dir, `${containerId}.json`);
  }

  async save(state: FollowState): Promise<void> {
    if (!this.dirMade) await this.makeDir();
    const target = this.file(state.containerId);
    const temp = `${target}.tmp`;
    const json = JSON.stringify(state, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
    try {
      await writeFile(temp, json);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      // The directory was removed under us: make it again.
      await this.makeDir();
      await writeFile(temp, json);
    }
    await rename(temp, target);
  }

  private async makeDir(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    this.dirMade = true;
  }

  async load(containerId: string): Promise<FollowState | undefined> {
    let text: string;
    try {
      text = await readFile(this.file(containerId), "utf8");
    } catch {
      return undefined;
    }
    try {
      const raw = JSON.parse(text) as FollowState & { point: Record<string, string | number> };
      return {
        ...raw,
        point: { since: BigInt(raw.point.since), skip: Number(raw.point.skip), lastNanos: BigInt(raw.point.lastNanos) },
      };
    } catch (err) {
      throw new UnreadableFollowState(this.file(containerId), err);
    }
  }

  /** Moves an unreadable state into `corrupt/` (set-aside.ts); returns its new path. */
  setAside(containerId: string): Promise<string> {
    return setAside(this.file(containerId));
  }

  /** Removes the state and a temporary file a crash may have left; none there is fine. */
  async remove(containerId: string): Promise<void> {
    await Promise.all([unlinkIfPresent(this.file(containerId)), unlinkIfPresent(`${this.file(containerId)}.tmp`)]);
  }

  async list(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => /^[0-9a-f]{64}\.json$/.test(n)).map((n) => n.slice(0, -5));
  }
}

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

export interface FileTail {
  /** Complete records after the saved offset. */
  records: number;
  /** Newest timestamp among them (0n when none). */
  lastNanos: bigint;
}

/**
 * Counts the records appended to the CRI file after `offset` and cuts off a
 * torn last record (cridock killed in the middle of a write), which the
 * replay then writes again in full. Undefined when the file is not the one
 * the state refers to.
 */
export async function countRecordsAfter(
  path: string,
  inode: number,
  offset: number,
  parseNanos: (timestamp: string) => bigint | undefined,
): Promise<FileTail | undefined> {
  const info = await stat(path).catch(() => undefined);
  if (!info || info.ino !== inode || info.size < offset) return undefined;
  const handle = await open(path, "r+");
  try {
    let records = 0;
    let lastNanos = 0n;
    let position = offset;
    let lineStart = offset;
    let carry = Buffer.alloc(0);
    const chunk = Buffer.alloc(1 << 20);
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      let data = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
      let start = 0;
      let nl: number;
      while ((nl = data.indexOf(0x0a, start)) >= 0) {
        records++;
        const ts = parseNanos(data.toString("latin1", start, Math.min(nl, start + 40)).split(" ")[0] ?? "");
        if (ts !== undefined && ts > lastNanos) lastNanos = ts;
        lineStart += nl + 1 - start;
        start = nl + 1;
      }
      carry = Buffer.from(data.subarray(start));
      data = Buffer.alloc(0);
      position += bytesRead;
    }
    if (lineStart < info.size) await handle.truncate(lineStart);
    return { records, lastNanos };
  } finally {
    await handle.close();
  }
}
