/**
 * Tells a json-file follower when to look at Docker's log again, so a quiet
 * container costs no reads, stats or timers beyond a slow safety poll.
 *
 * The watch is on Docker's container directory (inotify through fs.watch,
 * which Node and Deno 2 both implement), not on the file: a directory watch
 * sees writes to `<id>-json.log`, and also the renames and the new file of a
 * json-file rotation, which a watch on the file's inode would not. Other
 * names changing there (dockerd rewrites config.v2.json when the container's
 * state changes, e.g. when it exits) are passed on as "state" hints.
 *
 * A watch may not be had (the inotify limits are reached, a filesystem
 * without inotify) or may fail later; then `available` is false and the
 * follower falls back to polling every second.
 */
import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "../log.ts";

/** Why a wait ended. */
export type WakeReason = "log" | "state" | "timeout" | "aborted";

/**
 * A latch for one waiter: ring() before wait() is kept, so a change that
 * lands between a read and the wait is never slept through.
 */
export class Doorbell {
  private pendingLog = false;
  private pendingState = false;
  private waiter: ((reason: WakeReason) => void) | undefined;

  /** `log`: Docker's log files changed; `state`: something else about the container may have. */
  ring(kind: "log" | "state"): void {
    if (kind === "log") this.pendingLog = true;
    else this.pendingState = true;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      waiter(this.take()!);
    }
  }

  /**
   * Forgets the log changes rung so far, just before a read that will see
   * them all: the next wait then sleeps until something newer is written,
   * instead of waking at once for bytes already read.
   */
  clearLog(): void {
    this.pendingLog = false;
  }

  /** Waits for a ring, at most `ms`; a ring since the last wait returns at once. */
  wait(ms: number, signal: AbortSignal): Promise<WakeReason> {
    const now = this.take();
    if (now) return Promise.resolve(now);
    if (signal.aborted) return Promise.resolve("aborted");
    return new Promise((resolve) => {
      const finish = (reason: WakeReason) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.waiter = undefined;
        resolve(reason);
      };
      const onAbort = () => finish("aborted");
      const timer = setTimeout(() => finish("timeout"), ms);
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiter = finish;
    });
  }

  /** A state hint outranks a log change: the waiter then checks both. */
  private take(): WakeReason | undefined {
    const reason = this.pendingState ? "state" : this.pendingLog ? "log" : undefined;
    this.pendingLog = false;
    this.pendingState = false;
    return reason;
  }
}

export interface LogWatchOptions {
  /** Docker's live log file, `<dir>/<id>-json.log`; its rotated files are `<name>.1` … */
  logPath: string;
  bell: Doorbell;
  /** Called on a rename of one of the log's names (a rotation under way). */
  onRotate?: () => void;
  logger: Logger;
}

/**
 * The watch is armed only while the follower waits: while it reads, dockerd's
 * writes (one per line) would each cost a callback, which at a few MB/s of
 * short lines was more CPU than reading them. Arming again is one
 * inotify_add_watch; the follower reads once more after arming, so no write
 * slips between.
 */
export class LogWatch {
  private watcher: FSWatcher | undefined;
  /** False once a watch could not be had or broke: the follower polls. */
  private usable = true;
  /** Changes reported since the last call of takeEvents(). */
  private events = 0;

  private constructor(private readonly options: LogWatchOptions) {}

  /** Arms a first watch; the result reports `available` false when none could be had. */
  static open(options: LogWatchOptions): LogWatch {
    const w = new LogWatch(options);
    w.arm();
    return w;
  }

  /** Whether the directory can be watched (false: the follower polls). */
  get available(): boolean {
    return this.usable;
  }

  get armed(): boolean {
    return this.watcher !== undefined;
  }

  /** How many changes were reported since the last call (to tell a watch that misses events). */
  takeEvents(): number {
    const n = this.events;
    this.events = 0;
    return n;
  }

  /** Stops reporting until arm(); the follower reads meanwhile. */
  disarm(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Stops for good: the follower polls from now on. */
  close(): void {
    this.usable = false;
    this.disarm();
  }

  arm(): void {
    if (this.watcher || !this.usable) return;
    const { logPath, bell, logger } = this.options;
    const name = basename(logPath);
    let watcher: FSWatcher;
    try {
      watcher = watch(dirname(logPath), { persistent: false }, (event, filename) => {
        this.events++;
        // Some platforms leave the name out; then anything may have changed.
        const file = typeof filename === "string" ? filename : filename ? String(filename) : undefined;
        if (file === undefined || file === name || file.startsWith(`${name}.`)) {
          if (event === "rename") this.options.onRotate?.();
          bell.ring("log");
          if (file !== undefined) return;
        }
        bell.ring("state");
      });
    } catch (err) {
      logger.warn({ err, dockerLog: logPath }, "cannot watch Docker's log directory (raise fs.inotify.max_user_watches?); polling it every second instead");
      this.usable = false;
      return;
    }
    watcher.on("error", (err) => {
      watcher.close();
      if (this.watcher !== watcher) return;
      // The directory went away (the container was removed) or the watch broke: poll from now on.
      logger.debug({ err, dockerLog: logPath }, "the watch on Docker's log directory ended; polling instead");
      this.close();
      bell.ring("state");
    });
    this.watcher = watcher;
  }
}
