/**
 * The CRI container log file: `<RFC3339Nano> <stdout|stderr> <P|F> <content>\n`
 * records appended to `log_directory/log_path`.
 *
 * - Records are formatted in batches and appended with one write per batch,
 *   through libuv's thread pool, so a slow disk never blocks the event loop
 *   (and so never blocks the gRPC server).
 * - A failed write (disk full, directory removed) is logged and retried with
 *   backoff until it succeeds or the file is closed; the caller awaits the
 *   write, which is how back-pressure reaches the Docker log stream.
 * - reopen() closes the file and creates a new one at the same path after any
 *   in-flight write, which is what kubelet's log rotation needs: it renames
 *   the file, then calls ReopenContainerLog.
 */
import { open, mkdir, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "../log.ts";
import { logTotals } from "./totals.ts";

export type LogStream = "stdout" | "stderr";
export type LogTag = "P" | "F";

export interface CriRecord {
  /** RFC3339Nano timestamp, written as it is (Docker's fixed-width form). */
  timestamp: string;
  stream: LogStream;
  tag: LogTag;
  /** Content without the terminating newline. */
  content: Buffer;
}

/** Encodes records as they appear in the file. */
export function formatRecords(records: readonly CriRecord[]): Buffer {
  const parts: Buffer[] = [];
  for (const r of records) {
    parts.push(Buffer.from(`${r.timestamp} ${r.stream} ${r.tag} `, "latin1"), r.content, NEWLINE);
  }
  return Buffer.concat(parts);
}

const NEWLINE = Buffer.from("\n");

/** A parsed record line (for tests, resume and tools). */
export interface ParsedRecord {
  timestamp: string;
  stream: LogStream;
  tag: string;
  content: string;
}

/** Parses one line (without its "\n"); undefined when it is not a CRI record. */
export function parseRecord(line: string): ParsedRecord | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) (stdout|stderr) ([^ ]+) ([\s\S]*)$/.exec(line);
  if (!m) return undefined;
  return { timestamp: m[1]!, stream: m[2] as LogStream, tag: m[3]!.split(":")[0]!, content: m[4]! };
}

export interface CriLogFileOptions {
  path: string;
  logger: Logger;
  /** First retry delay after a failed write; doubles up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
}

export class CriLogFile<Mark = undefined> {
  readonly path: string;
  private handle: FileHandle | undefined;
  private closed = false;
  /** Inode and size of the open file: where the next record will land. */
  private inode = 0;
  private size = 0;
  /** The writer's own position (what it read up to) as of the last completed write. */
  private mark: Mark | undefined;
  /** Size as of the last completed append (a write in progress may have added part of its bytes). */
  private committedSize = 0;
  /** Serialises writes, reopen and close. */
  private tail: Promise<unknown> = Promise.resolve();
  private readonly log: Logger;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private wakeRetry: (() => void) | undefined;

  constructor(options: CriLogFileOptions) {
    this.path = options.path;
    this.log = options.logger;
    this.retryMs = options.retryMs ?? 100;
    this.maxRetryMs = options.maxRetryMs ?? 5_000;
  }

  /** Creates the file (and its directory) if needed. */
  open(): Promise<void> {
    return this.serial(async () => {
      await this.ensureOpen();
    });
  }

  /**
   * Appends records. Resolves once they are written; retries on errors, so it
   * only rejects when the file is closed meanwhile.
   */
  append(records: readonly CriRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    const bytes = formatRecords(records);
    return this.serial(async () => {
      await this.writeWithRetry(bytes);
      this.committedSize = this.size;
    });
  }

  /**
   * Appends bytes that are already whole CRI records; once they are written,
   * position() reports `mark` with the new size, so a checkpoint never pairs
   * a source position with a file size from different moments.
   */
  appendBytes(bytes: Buffer, mark: Mark): Promise<void> {
    return this.serial(async () => {
      if (bytes.length > 0) await this.writeWithRetry(bytes);
      this.mark = mark;
      this.committedSize = this.size;
    });
  }

  /** Inode and byte size of the file being written, and the mark, as of the last completed write. */
  position(): { inode: number; size: number; mark: Mark | undefined } {
    return { inode: this.inode, size: this.committedSize, mark: this.mark };
  }

  /** Closes the current file and opens a new one at the same path. */
  reopen(): Promise<void> {
    return this.serial(async () => {
      if (this.closed) throw new Error(`log file ${this.path} is closed`);
      await this.closeHandle();
      await this.ensureOpen();
    });
  }

  /** Closes for good; a write stuck in its retry loop gives up. */
  close(): Promise<void> {
    this.closed = true;
    this.wakeRetry?.();
    return this.serial(() => this.closeHandle());
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task, task);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async ensureOpen(): Promise<FileHandle> {
    if (this.handle) return this.handle;
    await mkdir(dirname(this.path), { recursive: true });
    const handle = await open(this.path, "a", 0o640);
    const stat = await handle.stat();
    this.handle = handle;
    // Reopening the same file after a failed write keeps the committed size:
    // the bytes of the interrupted batch past it are not committed yet.
    if (stat.ino !== this.inode) this.committedSize = stat.size;
    this.inode = stat.ino;
    this.size = stat.size;
    return handle;
  }

  private async closeHandle(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    if (handle) await handle.close().catch((err) => this.log.warn({ err, path: this.path }, "closing log file failed"));
  }

  private async writeWithRetry(bytes: Buffer): Promise<void> {
    let delay = this.retryMs;
    let offset = 0;
    const inode = this.inode;
    for (;;) {
      if (this.closed) throw new Error(`log file ${this.path} was closed with ${bytes.length - offset} bytes unwritten`);
      try {
        const handle = await this.ensureOpen();
        if (offset > 0 && this.inode !== inode) {
          // The file was replaced while retrying: the whole batch goes into the
          // new one, which must not start with the tail of a torn record.
          offset = 0;
        }
        while (offset < bytes.length) {
          const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
          offset += bytesWritten;
          this.size += bytesWritten;
          logTotals.bytesWritten += bytesWritten;
        }
        if (delay !== this.retryMs) this.log.info({ path: this.path }, "log file writable again");
        return;
      } catch (err) {
        this.log.warn({ err, path: this.path, retryInMs: delay }, "writing the container log failed; retrying");
        // A removed directory or a replaced file needs a fresh handle.
        await this.closeHandle();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          this.wakeRetry = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wakeRetry = undefined;
        delay = Math.min(delay * 2, this.maxRetryMs);
      }
    }
  }
}
