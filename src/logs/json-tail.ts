/**
 * Tails one container's Docker json-file log across Docker's rotations.
 *
 * The json-file driver rotates by renaming `<path>.(n-1)` → `<path>.n` … and
 * `<path>` → `<path>.1`, then creating a new `<path>`; the oldest beyond
 * max-file is deleted. With max-file 1 it truncates `<path>` in place. So:
 *
 * - Files are told apart by inode (plus the first bytes, since a deleted
 *   file's inode number can come back for a new one), never by name.
 * - The file being read stays open: a rename or deletion does not take its
 *   bytes away, and it is read to its end before moving on.
 * - Files that appear after it are opened as soon as they are seen (a stat of
 *   `<path>` when the directory watch reports a rename, also while the reader
 *   is busy or the CRI disk is stuck), so Docker deleting them later loses
 *   nothing either. At most
 *   MAX_HELD are held, so a stuck writer cannot pin unbounded disk space.
 * - What was lost anyway (Docker rotated a file away before it could be
 *   opened, or truncated it) is logged with what is known of its size and
 *   counted, never skipped silently.
 */
import { statSync } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import type { Logger } from "../log.ts";
import { logTotals } from "./totals.ts";

/** Where reading stands; persisted to resume after a restart. */
export interface TailPosition {
  inode: number;
  /** Byte offset in that file of the first byte not yet consumed. */
  offset: number;
  /** Base64 of the file's first bytes (up to HEAD_BYTES), to tell a reused inode apart. */
  head: string;
}

export interface LossReport {
  /** Separate occasions on which output was lost. */
  events: number;
  /** Bytes known to be lost (a lower bound when whole files went unseen). */
  bytes: number;
}

const HEAD_BYTES = 64;
/** Rotated files held open ahead of the reader. */
const MAX_HELD = 8;

interface TailFile {
  handle: FileHandle;
  inode: number;
  head: Buffer;
}

export interface JsonLogTailOptions {
  path: string;
  /** The container's max-file (how many names to probe: path, path.1 … path.(n-1)). */
  maxFiles: number;
  logger: Logger;
}

export class JsonLogTail {
  readonly path: string;
  private readonly maxFiles: number;
  private readonly log: Logger;
  private current: TailFile | undefined;
  /** Next byte to read from `current`. */
  private offset = 0;
  /** Successors of `current`, oldest first, already open. */
  private readonly queue: TailFile[] = [];
  private refreshing: Promise<void> | undefined;
  private rerun: Promise<void> | undefined;
  private closed = false;
  readonly lost: LossReport = { events: 0, bytes: 0 };

  constructor(options: JsonLogTailOptions) {
    this.path = options.path;
    this.maxFiles = Math.max(1, options.maxFiles);
    this.log = options.logger;
  }

  /** Starts at the beginning of the oldest file Docker still has (a container that just started). */
  async openFromStart(): Promise<void> {
    const chain = await this.openChain();
    if (chain.length === 0) throw new Error(`Docker's log file ${this.path} does not exist`);
    const oldest = chain.pop()!;
    this.current = oldest;
    this.offset = 0;
    this.queue.push(...chain.reverse());
  }

  /**
   * Continues from a saved position, also when Docker rotated that file
   * while cridock was down. Resolves to the position reading starts from,
   * which differs from `saved` only when output was lost (then logged).
   */
  async openAt(saved: TailPosition): Promise<TailPosition> {
    const chain = await this.openChain();
    if (chain.length === 0) throw new Error(`Docker's log file ${this.path} does not exist`);
    const savedHead = Buffer.from(saved.head, "base64");
    const at = chain.findIndex((f) => f.inode === saved.inode && sameHead(f.head, savedHead));
    if (at >= 0) {
      const file = chain[at]!;
      const size = (await file.handle.stat()).size;
      for (const f of chain.splice(at)) if (f !== file) await f.handle.close();
      this.current = file;
      this.queue.push(...chain.reverse());
      if (size >= saved.offset) {
        this.offset = saved.offset;
        return saved;
      }
      // max-file 1: Docker truncated the file in place since.
      this.noteLoss(undefined, "Docker truncated its log file past the saved position while cridock was down");
      this.offset = 0;
      return this.position(0);
    }
    const oldest = chain.pop()!;
    this.current = oldest;
    this.offset = 0;
    this.queue.push(...chain.reverse());
    this.noteLoss(undefined, "Docker rotated away the log file cridock was reading while it was down; continuing with the oldest file it kept");
    return this.position(0);
  }

  /** The position `consumedBack` bytes before the read offset of the current file. */
  position(consumedBack: number): TailPosition {
    const file = this.mustCurrent();
    return { inode: file.inode, offset: this.offset - consumedBack, head: file.head.toString("base64") };
  }

  /** Reads from the current file into `into[at…]`; 0 at its end (see next()). */
  async read(into: Buffer, at: number): Promise<number> {
    const file = this.mustCurrent();
    const { bytesRead } = await file.handle.read(into, at, into.length - at, this.offset);
    this.offset += bytesRead;
    // A file opened while still (nearly) empty gets its identity once it has some bytes.
    if (file.head.length < HEAD_BYTES && bytesRead > 0) file.head = await readHead(file.handle);
    return bytesRead;
  }

  /**
   * At the end of the current file: moves to its successor when Docker has
   * rotated (reading the old file to its very end first). Returns "more"
   * when the current file grew meanwhile, "switched" after moving to the
   * successor, "truncated" when the live file was cut under the reader
   * (max-file 1; reading restarts at 0), and "idle" when nothing new exists.
   * `checkRotation` false skips the look for Docker's new files when a watch
   * reports renames (and calls refresh() itself); a check under way is still
   * waited for.
   */
  async next(checkRotation = true): Promise<"more" | "switched" | "truncated" | "idle"> {
    if (checkRotation) await this.refresh();
    else await (this.rerun ?? this.refreshing);
    const file = this.mustCurrent();
    const size = (await file.handle.stat()).size;
    if (size > this.offset) return "more";
    if (this.queue.length > 0) {
      // Docker stops writing a file before it renames it, so this end is final.
      await file.handle.close();
      this.current = this.queue.shift();
      this.offset = 0;
      return "switched";
    }
    if (size < this.offset || (this.maxFiles === 1 && !sameHead(file.head, await readHead(file.handle)))) {
      this.noteLoss(undefined, "Docker truncated its log file before cridock read all of it (max-file 1)");
      this.offset = 0;
      file.head = await readHead(file.handle);
      return "truncated";
    }
    return "idle";
  }

  /**
   * A safety poll's look at a quiet log, without libuv's threadpool: true
   * when `<path>` is still the file being read, read to its end, with no
   * successor waiting. One stat on the calling thread (a few microseconds
   * on Docker's local disk) instead of next()'s read, stat and fstat, each
   * a round through the threadpool of about ten system calls. False means
   * "look properly" (read(), next()), also when the stat fails.
   */
  unchangedSync(): boolean {
    if (this.closed || !this.current || this.queue.length > 0) return false;
    let live;
    try {
      live = statSync(this.path);
    } catch {
      return false;
    }
    return live.ino === this.current.inode && live.size === this.offset;
  }

  /**
   * Notices rotations: when `<path>` is a file not yet known, opens the files
   * that came after the newest known one. Cheap when nothing changed (one
   * stat); safe to call at any time, also concurrently (a call during a
   * check runs one more check after it).
   */
  refresh(): Promise<void> {
    if (this.refreshing) {
      // A change reported while a check runs may have come after its stat: check once more after it.
      this.rerun ??= this.refreshing.then(() => {
        this.rerun = undefined;
        return this.refresh();
      });
      return this.rerun;
    }
    this.refreshing = this.doRefresh().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.refreshing?.catch(() => undefined);
    const all = [this.current, ...this.queue.splice(0)];
    this.current = undefined;
    for (const f of all) await f?.handle.close().catch(() => undefined);
  }

  private async doRefresh(): Promise<void> {
    if (this.closed || !this.current) return;
    const newest = this.queue[this.queue.length - 1] ?? this.current;
    const live = await stat(this.path).catch(() => undefined);
    if (!live || live.ino === newest.inode) return;
    if (this.queue.length >= MAX_HELD) return;
    const chain = await this.openChain();
    if (this.closed) {
      for (const f of chain) await f.handle.close();
      return;
    }
    const known = [this.current, ...this.queue].filter((f): f is TailFile => f !== undefined);
    const at = chain.findIndex((f) => same(f, newest));
    const fresh = (at >= 0 ? chain.slice(0, at) : chain).filter((f) => !known.some((k) => same(k, f)));
    for (const f of chain) if (!fresh.includes(f)) await f.handle.close();
    if (at < 0 && fresh.length > 0) {
      // The newest file we knew has itself been rotated out, so the oldest file
      // left may or may not be its direct successor: files may be lost.
      this.noteLoss(undefined, "Docker rotated its log files faster than cridock could open them; files between may be lost (raise --docker-log-max-size or --docker-log-max-file)");
    }
    for (const f of fresh.reverse()) {
      if (this.queue.length >= MAX_HELD) {
        await f.handle.close();
        continue;
      }
      this.queue.push(f);
    }
  }

  /**
   * Opens `<path>`, `<path>.1` … newest first. A rotation while opening
   * shows up as the same file under two names (files only move to older
   * names), and the scan is repeated.
   */
  private async openChain(): Promise<TailFile[]> {
    for (let attempt = 0; ; attempt++) {
      const files: TailFile[] = [];
      let liveMissing = false;
      for (let i = 0; i < Math.max(this.maxFiles, 2) + 1; i++) {
        const name = i === 0 ? this.path : `${this.path}.${i}`;
        let handle: FileHandle;
        try {
          handle = await open(name, "r");
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
          if (i === 0) liveMissing = true;
          continue;
        }
        const info = await handle.stat();
        files.push({ handle, inode: info.ino, head: await readHead(handle) });
      }
      const unique = new Set(files.map((f) => f.inode)).size === files.length;
      // Between Docker's rename of <path> and its creation of the new one, the live name is missing.
      if ((unique && !liveMissing) || attempt >= 20) return files;
      for (const f of files) await f.handle.close();
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private noteLoss(bytes: number | undefined, message: string): void {
    this.lost.events++;
    if (bytes) this.lost.bytes += bytes;
    logTotals.lostEvents++;
    if (bytes) logTotals.lostBytes += bytes;
    this.log.warn({ dockerLog: this.path, lostEvents: this.lost.events, lostBytes: bytes ?? "unknown" }, message);
  }

  private mustCurrent(): TailFile {
    if (!this.current) throw new Error(`Docker's log ${this.path} is not open`);
    return this.current;
  }
}

function same(a: TailFile, b: TailFile): boolean {
  return a.inode === b.inode && sameHead(a.head, b.head);
}

async function readHead(handle: FileHandle): Promise<Buffer> {
  const head = Buffer.alloc(HEAD_BYTES);
  const { bytesRead } = await handle.read(head, 0, HEAD_BYTES, 0);
  return head.subarray(0, bytesRead);
}

/** Same file when one's first bytes are a prefix of the other's (a file grows). */
function sameHead(a: Buffer, b: Buffer): boolean {
  const n = Math.min(a.length, b.length);
  return a.subarray(0, n).equals(b.subarray(0, n));
}
