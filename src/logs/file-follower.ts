/**
 * Writes one container's CRI log file from Docker's json-file log on disk:
 * large reads of `<docker root>/containers/<id>/<id>-json.log` (and its
 * rotated files, see json-tail.ts), converted in place (json-log.ts) and
 * appended in one write per read. This is several times faster than Docker's
 * log API, which decodes and re-encodes the same file, and reads at the
 * speed of the disk, so Docker's bounded copy does not rotate lines away
 * before they are read.
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
 */
import { stat } from "node:fs/promises";
import { isNotFound } from "../docker/errors.ts";
import { parseDockerTime } from "../docker/time.ts";
import { delay, FollowerBase, type LogFollowerOptions } from "./follower-base.ts";
import { JsonLogConverter } from "./json-log.ts";
import { JsonLogTail, type TailPosition } from "./json-tail.ts";
import { countRecordsAfter, FROM_START, type FollowState } from "./resume.ts";

const READ_SIZE = 1 << 20;
/** Output of one read: records are never longer than their JSON lines, plus padding of the time. */
const OUT_SLACK = 64 * 1024;
/** How often Docker's directory is checked for new files while the reader is busy elsewhere. */
const REFRESH_MS = 250;
/** Polling an idle log: from MIN to MAX, doubling while nothing arrives. */
const IDLE_MIN_MS = 2;
const IDLE_MAX_MS = 200;
/** When the container's process cannot be seen in /proc, ask Docker this often whether it exited. */
const INSPECT_EVERY_MS = 2_000;
/** Resume: how long the end of Docker's log is waited for while entries already written are passed over. */
const SKIP_WAIT_MS = 50;
const SKIP_WAIT_TRIES = 20;
/** Once the container exited, output is complete after a quiet period this long. */
const SETTLE_MS = 100;

/** The same inputs as the Docker-API follower's. */
export type JsonFileFollowerOptions = LogFollowerOptions;

type Phase = "more" | "file-end" | "output-end";

export class JsonFileFollower extends FollowerBase<TailPosition> {
  private tail: JsonLogTail | undefined;
  private converter = new JsonLogConverter();
  private input = Buffer.allocUnsafe(READ_SIZE);
  private output = Buffer.allocUnsafe(READ_SIZE + OUT_SLACK);
  /** Bytes at the start of `input` read but not consumed yet (a line still incomplete or held). */
  private carry = 0;
  private lastTime = "";
  private dockerLogPath = "";
  private maxFiles = 1;
  private pid = 0;
  private lastInspect = 0;
  private refreshTimer: ReturnType<typeof setInterval> | undefined;
  /** Resumed from a checkpoint: nothing is saved before Docker's file is positioned again. */
  private resumed = false;

  /** Creates the CRI file now; reading Docker's log starts in the background. */
  async startFresh(): Promise<void> {
    await this.file.open();
    await this.persist();
    this.running = this.run(() => this.openTail(undefined, 0));
  }

  /** Resumes after a restart from a checkpoint written by this class. */
  async resume(state: FollowState): Promise<void> {
    // Records past the checkpoint came from the entries right after its position.
    const tail = await countRecordsAfter(state.logPath, state.inode, state.offset, parseDockerTime).catch((err) => {
      this.log.warn({ err }, "cannot read the CRI log file's tail; resuming from the checkpoint alone");
      return undefined;
    });
    this.lastTime = state.source?.lastTime ?? "";
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

  /** Output Docker rotated away before it was read (counted; each occasion is logged). */
  get lost(): { events: number; bytes: number } {
    return this.tail?.lost ?? { events: 0, bytes: 0 };
  }

  protected override checkpointable(): boolean {
    return this.converter.skip === 0 && (!this.resumed || this.file.position().mark !== undefined);
  }

  private async run(open: () => Promise<boolean>): Promise<void> {
    try {
      if (!(await open())) {
        await this.persist(true);
        return;
      }
      // The checkpoint from here on names Docker's file and offset.
      await this.persist();
      const tail = this.tail!;
      this.refreshTimer = setInterval(() => {
        tail.refresh().catch((err) => this.log.warn({ err }, "cannot check Docker's log files for rotation"));
      }, REFRESH_MS);
      this.refreshTimer.unref?.();
      let idleMs = IDLE_MIN_MS;
      let exitedAt = 0;
      while (!this.abort.signal.aborted) {
        if (this.carry === this.input.length) this.grow();
        const n = await tail.read(this.input, this.carry);
        if (n > 0) {
          await this.consume(this.carry + n, "more");
          idleMs = IDLE_MIN_MS;
          continue;
        }
        const step = await tail.next();
        if (step === "more") continue;
        if (step === "switched" || step === "truncated") {
          await this.endOfFile(step === "switched" ? "file-end" : "output-end");
          continue;
        }
        if (exitedAt === 0) {
          if (await this.exited()) exitedAt = Date.now();
        } else if (Date.now() - exitedAt >= SETTLE_MS) {
          break;
        }
        await delay(exitedAt > 0 ? SETTLE_MS : idleMs, this.abort.signal);
        idleMs = Math.min(idleMs * 2, IDLE_MAX_MS);
      }
      if (this.abort.signal.aborted) return;
      await this.endOfFile("output-end");
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
    this.pid = inspect.State.Running ? inspect.State.Pid : 0;
    const tail = new JsonLogTail({ path: this.dockerLogPath, maxFiles: this.maxFiles, logger: this.log });
    this.tail = tail;
    let start: TailPosition;
    if (from) {
      start = await tail.openAt(from);
      if (start.inode !== from.inode || start.offset !== from.offset) {
        // What was written came from the lost part; nothing of the new start is in the file.
        this.log.warn({ lastWritten: this.lastTime || "unknown" }, "Docker's log position was lost while cridock was down; output after the last written line up to the oldest line Docker kept is missing");
        skip = 0;
      }
    } else {
      await tail.openFromStart();
      start = tail.position(0);
    }
    this.converter = new JsonLogConverter(skip);
    await this.file.appendBytes(Buffer.alloc(0), start);
    return true;
  }

  /**
   * Reads past the entries whose records an earlier run wrote after its last
   * checkpoint (the converter's skip). They are in Docker's log already; an
   * entry may still be in the middle of being written, so the end of the log
   * is waited for briefly before the rest is given up as not there.
   */
  private async skipWritten(): Promise<void> {
    const tail = this.tail!;
    let idle = 0;
    while (this.converter.skip > 0 && !this.abort.signal.aborted) {
      if (this.carry === this.input.length) this.grow();
      const n = await tail.read(this.input, this.carry);
      if (n > 0) {
        await this.consume(this.carry + n, "more");
        continue;
      }
      const step = await tail.next();
      if (step === "more") continue;
      if (step === "switched" || step === "truncated") {
        await this.endOfFile(step === "switched" ? "file-end" : "output-end");
        continue;
      }
      if (++idle > SKIP_WAIT_TRIES) {
        this.log.warn({ records: this.converter.skip }, "the CRI log file holds records Docker's log does not; continuing after Docker's last entry");
        this.converter.skip = 0;
        break;
      }
      await delay(SKIP_WAIT_MS, this.abort.signal);
    }
  }

  /** Converts and writes the complete lines in input[0, length); keeps the rest as carry. */
  private async consume(length: number, phase: Phase): Promise<void> {
    let pos = 0;
    while (pos < length) {
      const r = this.converter.convert(this.input, pos, length, this.output, 0, { more: phase === "more", lastPartialEndsLine: phase === "output-end" });
      pos += r.consumed;
      if (r.lastTime) this.lastTime = r.lastTime;
      if (r.malformedBytes > 0) this.log.warn({ bytes: r.malformedBytes, dockerLog: this.dockerLogPath }, "skipped bytes of Docker's log that are not log entries");
      if (r.consumed === 0) break;
      await this.file.appendBytes(this.output.subarray(0, r.written), this.tail!.position(length - pos));
      await this.persistIfDue();
    }
    this.input.copy(this.input, 0, pos, length);
    this.carry = length - pos;
  }

  /** Flushes what a finished file left; an incomplete last line there can never complete. */
  private async endOfFile(phase: Phase): Promise<void> {
    if (this.carry > 0) await this.consume(this.carry, phase);
    if (this.carry > 0) {
      this.log.warn({ bytes: this.carry, dockerLog: this.dockerLogPath }, "Docker's log file ends in an incomplete entry; its bytes are dropped");
      this.carry = 0;
    }
  }

  /**
   * Whether the container has exited. Asking Docker on every idle poll would
   * load dockerd with many idle containers, so while the container's process
   * is visible in /proc that is the check, confirmed with Docker now and then
   * (a reused pid); otherwise Docker is asked at most every INSPECT_EVERY_MS.
   */
  private async exited(): Promise<boolean> {
    const sinceInspect = Date.now() - this.lastInspect;
    if (this.pid > 0 ? (await processExists(this.pid)) && sinceInspect < 10 * INSPECT_EVERY_MS : sinceInspect < INSPECT_EVERY_MS) {
      return false;
    }
    this.lastInspect = Date.now();
    try {
      const inspect = await this.options.docker.inspectContainer(this.containerId);
      if (inspect.State.Running) {
        // A pid this process cannot see (another pid namespace) is no use.
        this.pid = (await processExists(inspect.State.Pid)) ? inspect.State.Pid : 0;
        return false;
      }
      return true;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
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
      source: position.mark ? { dockerLogPath: this.dockerLogPath, maxFiles: this.maxFiles, position: position.mark, lastTime: this.lastTime } : undefined,
    };
  }

  private grow(): void {
    const bigger = Buffer.allocUnsafe(this.input.length * 2);
    this.input.copy(bigger, 0, 0, this.carry);
    this.input = bigger;
    this.output = Buffer.allocUnsafe(bigger.length + OUT_SLACK);
  }
}

function processExists(pid: number): Promise<boolean> {
  return stat(`/proc/${pid}`).then(() => true, () => false);
}
