/**
 * Follows one container's Docker log stream into its CRI log file:
 * `GET /containers/{id}/logs?follow=1&stdout=1&stderr=1&timestamps=1&since=…`.
 *
 * Each Docker message becomes exactly one CRI record (F when it ends its
 * line, P when Docker cut the line), which is what makes resuming exact: the
 * replay after a restart skips as many messages as the file already holds
 * (see resume.ts). A message that ends in the middle of a line is held back
 * until the next message arrives, so the last piece of output gets F when the
 * stream ends; the written records are thus always a prefix of Docker's
 * order.
 *
 * The follower awaits every file write before reading on, so a slow disk
 * slows the Docker stream (Docker keeps its own bounded copy meanwhile) and
 * never grows memory.
 */
import { isNotFound } from "../docker/errors.ts";
import { dockerSinceParam, parseDockerTime } from "../docker/time.ts";
import type { CriRecord } from "./crilog.ts";
import { MultiplexedLogParser, TtyLogParser, type DockerLogMessage } from "./docker-log.ts";
import { delay, FollowerBase } from "./follower-base.ts";
import { countRecordsAfter, FROM_START, WrittenTracker, WINDOW_NANOS, type FollowState, type ResumePoint } from "./resume.ts";

export type { LogFollowerOptions } from "./follower-base.ts";

/** Reconnect delay when the stream drops while the container still runs. */
const RECONNECT_MS = 500;

export class LogFollower extends FollowerBase {
  private tracker = new WrittenTracker();
  private held: DockerLogMessage | undefined;
  /** Messages of the current replay still to pass over (an earlier run wrote them). */
  private skip = 0;

  /** Starts from the first line (a container cridock just started). */
  async startFresh(): Promise<void> {
    await this.file.open();
    await this.persist();
    this.running = this.run(FROM_START);
  }

  /** Resumes after a restart from a persisted state. */
  async resume(state: FollowState): Promise<void> {
    let point = state.point;
    const tail = await countRecordsAfter(state.logPath, state.inode, state.offset, parseDockerTime).catch((err) => {
      this.log.warn({ err }, "cannot read the log file tail; resuming from the checkpoint alone");
      return undefined;
    });
    if (tail) {
      point = {
        since: point.since,
        skip: point.skip + tail.records,
        lastNanos: tail.lastNanos > point.lastNanos ? tail.lastNanos : point.lastNanos,
      };
    }
    await this.file.open();
    this.log.info({ since: point.since.toString(), skip: point.skip }, "resuming the container log");
    this.running = this.run(point);
  }

  private async run(start: ResumePoint): Promise<void> {
    let point = start;
    let failures = 0;
    try {
      for (;;) {
        const ended = await this.followOnce(point, true);
        if (this.abort.signal.aborted) return;
        point = this.tracker.point();
        if (ended === "exited") {
          // dockerd 20.10 can end a follow stream before it sent the last
          // lines of a container that just exited; one plain read from the
          // same position fetches whatever is missing (the skip drops the rest).
          if ((await this.followOnce(point, false)) === "exited") break;
          point = this.tracker.point();
        }
        await delay(Math.min(RECONNECT_MS * 2 ** failures++, 5_000), this.abort.signal);
      }
      this.finished = true;
      await this.persist(true);
      await this.file.close();
      this.log.debug("container log complete");
    } catch (err) {
      if (this.abort.signal.aborted) return;
      this.log.error({ err }, "following the container log failed");
      await this.persist().catch(() => undefined);
    }
  }

  /** One log request; says whether the container has exited or the stream merely dropped. */
  private async followOnce(point: ResumePoint, follow: boolean): Promise<"exited" | "dropped"> {
    const { docker, containerId, tty } = this.options;
    this.tracker = new WrittenTracker(point.since, point.lastNanos);
    this.held = undefined;
    this.skip = point.skip;
    // A replayed message well past everything written cannot be a written one.
    const skipLimit = point.lastNanos + WINDOW_NANOS;
    const parser = tty ? new TtyLogParser() : new MultiplexedLogParser();
    const take = async (messages: DockerLogMessage[], atEnd: boolean) => {
      const records: (CriRecord & { nanos: bigint })[] = [];
      for (const m of messages) {
        if (this.skip > 0 && m.nanos <= skipLimit) {
          this.skip--;
          this.tracker.note(m.nanos);
          continue;
        }
        this.skip = 0;
        if (this.held) records.push(record(this.held, "P"));
        this.held = m.partial ? m : undefined;
        if (!m.partial) records.push(record(m, "F"));
      }
      // Output that ends mid-line stays P (see JsonLogConverter.convert).
      if (atEnd && this.held) {
        records.push(record(this.held, "P"));
        this.held = undefined;
      }
      if (records.length === 0) return;
      await this.file.append(records);
      // Noted only once in the file, so a checkpoint never counts a record
      // that is not there.
      for (const r of records) this.tracker.note(r.nanos);
      await this.persistIfDue();
    };
    try {
      const response = await docker.raw("GET", `/containers/${containerId}/logs`, {
        query: {
          follow,
          stdout: true,
          stderr: true,
          timestamps: true,
          since: point.since > 0n ? dockerSinceParam(point.since) : undefined,
        },
        timeoutMs: 0,
        signal: this.abort.signal,
      });
      for await (const chunk of response.body) {
        await take(parser.push(chunk as Buffer), false);
      }
      const exited = !follow || (await this.exited());
      await take(parser.end(), exited);
      return exited ? "exited" : "dropped";
    } catch (err) {
      if (this.abort.signal.aborted) throw err;
      if (isNotFound(err)) return "exited";
      // Reconnecting replays what is missing, also for a container that has
      // exited meanwhile.
      this.log.warn({ err }, "the Docker log stream broke; reconnecting");
      return "dropped";
    }
  }

  private async exited(): Promise<boolean> {
    try {
      const inspect = await this.options.docker.inspectContainer(this.options.containerId);
      return !inspect.State.Running;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
  }

  /** While passing over written messages, the file holds records the tracker has not noted yet. */
  protected override checkpointable(): boolean {
    return this.skip === 0;
  }

  protected checkpoint(done: boolean): FollowState {
    const position = this.file.position();
    return {
      containerId: this.containerId,
      logPath: this.options.logPath,
      tty: this.options.tty,
      point: this.tracker.point(),
      inode: position.inode,
      offset: position.size,
      done,
    };
  }
}

function record(m: DockerLogMessage, tag: "P" | "F"): CriRecord & { nanos: bigint } {
  return { timestamp: m.timestamp, stream: m.stream, tag, content: m.content, nanos: m.nanos };
}
