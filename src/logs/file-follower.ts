/**
 * Writes one container's CRI log file from Docker's json-file log on disk:
 * large reads of `<docker root>/containers/<id>/<id>-json.log` (and its
 * rotated files, see json-tail.ts), converted in place (json-log.ts) and
 * appended in one write per read (the buffers are json-pump.ts's). This is
 * several times faster than Docker's log API, which decodes and re-encodes
 * the same file, and reads at the speed of the disk, so Docker's bounded
 * copy does not rotate lines away before they are read.
 *
 * Resume is exact. Each Docker entry becomes one record; every write carries
 * the Docker position it reached (CriLogFile marks), and the checkpoint pairs
 * that position with the CRI file's size. After a restart the records found
 * past that size were written from the entries right after the position, so
 * that many entries are skipped, and a torn last record is cut and rewritten.
 *
 * The run loop awaits every write, so a slow or full disk holds this
 * container's reader only (CriLogFile logs and retries); the tail keeps
 * opening Docker's new files meanwhile, so rotation does not lose them.
 *
 * A quiet container costs nothing: the loop sleeps until the watch on
 * Docker's directory reports a change (log-watch.ts) or Docker reports the
 * container's end (checkExit), with only a slow safety poll that backs
 * off to five minutes, for events a watch can miss (a full inotify queue).
 * Without a watch it polls every second.
 */
import { isNotFound } from "../docker/errors.ts";
import { ContainerExitCheck } from "./container-exit.ts";
import { parseDockerTime } from "../docker/time.ts";
import { delay, FollowerBase, type LogFollowerOptions } from "./follower-base.ts";
import { JsonLogPump } from "./json-pump.ts";
import { JsonLogTail, type TailPosition } from "./json-tail.ts";
import { Doorbell, LogWatch, type WakeReason } from "./log-watch.ts";
import { countRecordsAfter, FROM_START, type FollowState } from "./resume.ts";

/**
 * With a watch, the safety poll of a quiet log: first this long after the
 * last change, then doubling up to the maximum. It finds what a watch missed
 * (events are dropped only when the inotify queue overflows, which takes a
 * burst of writes, so the look soon after activity is the one that matters),
 * and the container's end when both Docker's die event and the state-file
 * change were missed. A look is four file operations through libuv's
 * threadpool, about 40 system calls, so a quiet log is first looked at
 * with two stats on the event loop (unchangedSync, runningSync), and the
 * full look is made only when they find a change.
 */
const SAFETY_FIRST_MS = 2_000;
const SAFETY_MAX_MS = 300_000;
/**
 * After a change is reported, reading waits this long so the writes of a
 * burst are read, converted and written out together: dockerd writes each
 * line on its own, and reading each as it lands cost several times the CPU
 * per MB.
 */
const BATCH_MS = 10;
/**
 * While output keeps coming, reads are this far apart: each round (a read,
 * a conversion, a write, their promises and timers) cost about 1.5 ms of
 * CPU whatever it carried, so a container printing a line every 100 ms
 * cost 1.5% of a core and logging at 1 MB/s 30 ms of CPU per MB. Output
 * after a quiet spell is still read BATCH_MS after it lands.
 */
const FLOWING_MS = 250;
/** While reading (the watch is off), how often Docker's directory is checked for new files. */
const REFRESH_MS = 250;
/** Without a watch: how often the log is polled, and Docker's directory checked for new files. */
const POLL_MS = 1_000;
/** A safety poll that finds output no event announced, this many times in a row, ends the watch. */
const MISSES_TO_POLL = 2;
/** Resume: how long the end of Docker's log is waited for while entries already written are passed over. */
const SKIP_WAIT_MS = 50;
const SKIP_WAIT_TRIES = 20;

/** The Docker-API follower's inputs, and the safety poll's timing (tests shorten or lengthen it). */
export interface JsonFileFollowerOptions extends LogFollowerOptions {
  safetyPollMs?: { first: number; max: number };
}

/**
 * `ms` stretched to end on a whole second of the clock. Node runs every
 * timer that is due in one wake of the event loop, so the safety polls of
 * many quiet containers then share wakes (one epoll_pwait and its timer
 * bookkeeping a second at most) instead of each waking the loop on its own.
 */
export function onTheSecond(ms: number, now = Date.now()): number {
  return ms + 999 - ((now + ms + 999) % 1000);
}

export class JsonFileFollower extends FollowerBase<TailPosition> {
  private tail: JsonLogTail | undefined;
  private readonly pump: JsonLogPump;
  private dockerLogPath = "";
  private maxFiles = 1;
  private readonly bell = new Doorbell();
  private watch: LogWatch | undefined;
  private exit: ContainerExitCheck;
  private refreshTimer: ReturnType<typeof setInterval> | undefined;
  /** Resumed from a checkpoint: nothing is saved before Docker's file is positioned again. */
  private resumed = false;

  constructor(protected override readonly options: JsonFileFollowerOptions) {
    super(options);
    this.pump = new JsonLogPump({
      logger: this.log,
      sink: async (records, unread) => {
        await this.file.appendBytes(records, this.tail!.position(unread));
        await this.persistIfDue();
      },
    });
    this.exit = new ContainerExitCheck(options.docker, this.containerId);
  }

  /**
   * Creates the CRI file and finds Docker's log now, so the one checkpoint
   * written before StartContainer answers already names Docker's file (a
   * checkpoint costs a new file and a rename: on ext4 under churn, creating
   * inodes is most of the kernel's time a container start costs cridock);
   * reading starts in the background.
   */
  async startFresh(): Promise<void> {
    await this.file.open();
    let opened: boolean | Error;
    try {
      opened = await this.openTail(undefined, 0);
    } catch (err) {
      opened = err instanceof Error ? err : new Error(String(err));
    }
    // A failed open is checkpointed as not started (resume reads Docker's log from its start).
    if (opened !== false) await this.persist();
    this.running = this.run(async () => {
      if (opened instanceof Error) throw opened;
      return opened;
    }, opened === true);
  }

  /** Resumes after a restart from a checkpoint written by this class. */
  async resume(state: FollowState): Promise<void> {
    // Records past the checkpoint came from the entries right after its position.
    const tail = await countRecordsAfter(state.logPath, state.inode, state.offset, parseDockerTime).catch((err) => {
      this.log.warn({ err }, "cannot read the CRI log file's tail; resuming from the checkpoint alone");
      return undefined;
    });
    this.pump.lastTime = state.source?.lastTime ?? "";
    this.resumed = true;
    await this.file.open();
    this.log.info({ records: tail?.records ?? 0, from: state.source?.position }, "resuming the container log from Docker's log file");
    // Pass over the entries already in the file before this follower is
    // registered, so no checkpoint or reopen falls between.
    let opened: boolean | Error;
    try {
      opened = await this.openTail(state.source?.position, tail?.records ?? 0);
      if (opened) await this.skipWritten();
    } catch (err) {
      opened = err instanceof Error ? err : new Error(String(err));
    }
    this.running = this.run(async () => {
      if (opened instanceof Error) throw opened;
      return opened;
    });
  }

  /** Docker reported the container's end (its die event), or events may have been missed: ask Docker now instead of at the next safety poll. */
  override checkExit(): void {
    this.exit.report();
    this.bell.ring("state");
  }

  /** Whether Docker's directory can be watched (false: polling every POLL_MS). */
  get watching(): boolean {
    return this.watch?.available ?? false;
  }

  /** Output Docker rotated away before it was read (counted; each occasion is logged). */
  get lost(): { events: number; bytes: number } {
    return this.tail?.lost ?? { events: 0, bytes: 0 };
  }

  protected override checkpointable(): boolean {
    return this.pump.skip === 0 && (!this.resumed || this.file.position().mark !== undefined);
  }

  /** `persisted`: the checkpoint already names the position open() reached. */
  private async run(open: () => Promise<boolean>, persisted = false): Promise<void> {
    try {
      if (!(await open())) {
        await this.persist(true);
        return;
      }
      // The checkpoint from here on names Docker's file and offset.
      if (!persisted) await this.persist();
      const tail = this.tail!;
      const safety = this.options.safetyPollMs ?? { first: SAFETY_FIRST_MS, max: SAFETY_MAX_MS };
      let safetyMs = safety.first;
      /**
       * Docker said the container ended. It says so only after its log
       * copier drained the container's pipes and the log driver closed
       * (dockerd's exit handler waits for both before it marks the container
       * stopped and sends the die event), so what Docker's files hold then
       * is all there will be: read to their end once, without waiting for
       * more, and finish. ContainerStatus waits for that before it reports
       * the exit (kubelet and kubectl read the log right after).
       */
      let exited = false;
      let woke: WakeReason = "state";
      /** The last wake was a safety poll with no event since the one before. */
      let unannounced = false;
      let misses = 0;
      while (!this.abort.signal.aborted) {
        // Reading: the watch is off, so Docker's new files are looked for on a timer (also while a write is stuck).
        if (!this.watch?.armed) this.pollRefresh();
        // This read sees everything rung so far.
        this.bell.clearLog();
        const pulled = await this.pump.pull(tail);
        if (unannounced) {
          misses = pulled.bytes > 0 ? misses + 1 : 0;
          unannounced = false;
          if (misses >= MISSES_TO_POLL) this.dropWatch();
        }
        if (pulled.bytes > 0) {
          this.watch?.disarm();
          // Caught up with dockerd while it still writes (the read did not fill
          // the buffer): let its next lines gather for a while instead of
          // chasing every write with a read, a conversion and a write of the
          // CRI file, each a round through libuv's threadpool.
          // Docker's die event cuts the pause short, and none is made once
          // it came: the end is confirmed at the end of the file.
          if (!pulled.filled && !exited && !this.exit.pending) {
            this.bell.clearLog();
            await this.bell.wait(FLOWING_MS, this.abort.signal);
          }
          continue;
        }
        // While armed, renames call refresh() themselves; a safety poll looks anyway (a missed rename),
        // and so does the last look after the end (a rename whose event is still on its way).
        const step = await tail.next(exited || !this.watch?.armed || woke !== "log");
        if (step === "more") continue;
        if (step === "switched" || step === "truncated") {
          await this.pump.endOfFile(step === "switched" ? "file-end" : "output-end");
          continue;
        }
        if (exited) break;
        if (this.watch?.available && !this.watch.armed) {
          // At the end of the log: watch again, then read once more for what came before the watch.
          this.stopPollRefresh();
          this.watch.arm();
          continue;
        }
        // Changes of the log itself say nothing about the container's end.
        if ((woke !== "log" || this.exit.pending) && (await this.exit.exited())) {
          exited = true;
          continue;
        }
        for (;;) {
          woke = await this.bell.wait(onTheSecond(this.watching ? safetyMs : POLL_MS), this.abort.signal);
          if (woke !== "timeout") break;
          safetyMs = Math.min(safetyMs * 2, safety.max);
          const announced = this.watching && this.watch!.takeEvents() > 0;
          // A safety poll that finds the log as it was and the process alive
          // sleeps again at once: two system calls on this thread, where the
          // full look below costs about forty through the threadpool (with
          // 40 quiet containers, 80 a second while their polls back off).
          if (this.watch?.armed && !announced && tail.unchangedSync() && this.exit.runningSync()) {
            misses = 0;
            continue;
          }
          unannounced = this.watching && !announced;
          break;
        }
        if (woke === "log") {
          this.watch?.disarm();
          await delay(BATCH_MS, this.abort.signal);
        }
        if (woke !== "timeout") safetyMs = safety.first;
      }
      if (this.abort.signal.aborted) return;
      await this.pump.endOfFile("output-end");
      this.finished = true;
      await this.persist(true);
      await this.file.close();
      this.log.debug("container log complete");
    } catch (err) {
      if (this.abort.signal.aborted) return;
      this.log.error({ err }, "following the container's Docker log file failed");
      await this.persist().catch(() => undefined);
    } finally {
      clearInterval(this.refreshTimer);
      this.watch?.close();
      await this.tail?.close();
    }
  }

  /** Finds Docker's log file and positions the tail; false when the container is gone. */
  private async openTail(from: TailPosition | undefined, skip: number): Promise<boolean> {
    let inspect;
    try {
      inspect = await this.options.docker.inspectContainer(this.containerId);
    } catch (err) {
      if (isNotFound(err)) {
        this.log.warn("the container was removed before its log could be read");
        this.finished = true;
        return false;
      }
      throw err;
    }
    if (!inspect.LogPath) throw new Error(`Docker reports no json-file log path for container ${this.containerId}`);
    this.dockerLogPath = inspect.LogPath;
    this.maxFiles = Number(inspect.HostConfig.LogConfig?.Config?.["max-file"] ?? "1") || 1;
    this.exit.noteInspect(inspect.State.Running, inspect.State.Pid);
    // Watching before the first read: whatever is written after it rings the bell.
    this.watch?.close();
    this.watch = LogWatch.open({
      logPath: this.dockerLogPath,
      bell: this.bell,
      logger: this.log,
      // Open Docker's new files as soon as they appear, also while the reader is busy elsewhere.
      onRotate: () => this.tail?.refresh().catch((err) => this.log.warn({ err }, "cannot check Docker's log files for rotation")),
    });
    const tail = new JsonLogTail({ path: this.dockerLogPath, maxFiles: this.maxFiles, logger: this.log });
    this.tail = tail;
    let start: TailPosition;
    if (from) {
      start = await tail.openAt(from);
      if (start.inode !== from.inode || start.offset !== from.offset) {
        // What was written came from the lost part; nothing of the new start is in the file.
        this.log.warn({ lastWritten: this.pump.lastTime || "unknown" }, "Docker's log position was lost while cridock was down; output after the last written line up to the oldest line Docker kept is missing");
        skip = 0;
      }
    } else {
      await tail.openFromStart();
      start = tail.position(0);
    }
    this.pump.restart(this.dockerLogPath, skip);
    await this.file.appendBytes(Buffer.alloc(0), start);
    return true;
  }

  /**
   * Reads past the entries whose records an earlier run wrote after its last
   * checkpoint (the pump's skip). They are in Docker's log already; an
   * entry may still be in the middle of being written, so the end of the log
   * is waited for briefly before the rest is given up as not there.
   */
  private async skipWritten(): Promise<void> {
    const tail = this.tail!;
    let idle = 0;
    while (this.pump.skip > 0 && !this.abort.signal.aborted) {
      if ((await this.pump.pull(tail)).bytes > 0) continue;
      const step = await tail.next();
      if (step === "more") continue;
      if (step === "switched" || step === "truncated") {
        await this.pump.endOfFile(step === "switched" ? "file-end" : "output-end");
        continue;
      }
      if (++idle > SKIP_WAIT_TRIES) {
        this.log.warn({ records: this.pump.skip }, "the CRI log file holds records Docker's log does not; continuing after Docker's last entry");
        this.pump.endSkip();
        break;
      }
      await delay(SKIP_WAIT_MS, this.abort.signal);
    }
  }

  /** While reading or without a watch, Docker's directory is checked for new files on a timer, also while the reader is busy. */
  private pollRefresh(): void {
    if (this.refreshTimer || !this.tail) return;
    const tail = this.tail;
    this.refreshTimer = setInterval(() => {
      tail.refresh().catch((err) => this.log.warn({ err }, "cannot check Docker's log files for rotation"));
    }, this.watching ? REFRESH_MS : POLL_MS);
    this.refreshTimer.unref?.();
  }

  private stopPollRefresh(): void {
    clearInterval(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  private dropWatch(): void {
    this.log.warn({ dockerLog: this.dockerLogPath }, "the watch on Docker's log directory misses changes (a filesystem without inotify?); polling it every second instead");
    this.watch?.close();
  }

  protected checkpoint(done: boolean): FollowState {
    const position = this.file.position();
    return {
      containerId: this.containerId,
      logPath: this.options.logPath,
      tty: this.options.tty,
      point: FROM_START,
      inode: position.inode,
      offset: position.size,
      done,
      kind: "json-file",
      source: position.mark ? { dockerLogPath: this.dockerLogPath, maxFiles: this.maxFiles, position: position.mark, lastTime: this.pump.lastTime } : undefined,
    };
  }
}
