/**
 * What both log followers share: the CRI file they write, reopening it for
 * kubelet's rotation, stopping, and checkpointing where they stand.
 *
 * The two followers differ only in where the output comes from (Docker's
 * json-file log on disk, file-follower.ts; Docker's log API, follower.ts)
 * and so in what their checkpoint holds. Everything about *when* a
 * checkpoint is written, and that checkpoints never overlap, lives here, so
 * a fix to resuming lands once.
 */
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { CriLogFile } from "./crilog.ts";
import type { FollowState, FollowStateStore } from "./resume.ts";

/** How often the position is checkpointed while output flows. */
export const PERSIST_INTERVAL_MS = 500;

export interface LogFollowerOptions {
  docker: DockerClient;
  store: FollowStateStore;
  logger: Logger;
  containerId: string;
  logPath: string;
  tty: boolean;
}

export abstract class FollowerBase<Mark = undefined> {
  readonly containerId: string;
  readonly file: CriLogFile<Mark>;
  protected readonly log: Logger;
  protected readonly abort = new AbortController();
  protected finished = false;
  protected running: Promise<void> | undefined;
  private lastPersist = 0;
  private persisting: Promise<void> = Promise.resolve();
  /** Written since the last checkpoint. */
  private dirty = false;
  private trailing: ReturnType<typeof setTimeout> | undefined;

  constructor(protected readonly options: LogFollowerOptions) {
    this.containerId = options.containerId;
    this.log = options.logger.child({ component: "log-follower", container: options.containerId.slice(0, 12) });
    this.file = new CriLogFile<Mark>({ path: options.logPath, logger: this.log });
  }

  /** Starts from the container's first line (a container cridock just started). */
  abstract startFresh(): Promise<void>;
  /** Resumes after a restart from a checkpoint written by the same kind of follower. */
  abstract resume(state: FollowState): Promise<void>;

  /** Resolves when the container's output is all in the file (or the follower was stopped). */
  wait(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  get done(): boolean {
    return this.finished;
  }

  /**
   * Docker reported the container's end. A follower that reads Docker's log
   * stream sees the end there and ignores this; one that reads the file
   * checks at once rather than at its next safety poll.
   */
  checkExit(): void {}

  /** Rotation: the next record goes to a new file at the same path. */
  async reopen(): Promise<void> {
    await this.file.reopen();
    await this.persist();
  }

  /** Stops following; keeps the checkpoint so a later start can resume. */
  async stop(): Promise<void> {
    this.abort.abort();
    clearTimeout(this.trailing);
    // Closing first ends a write stuck retrying on a full disk (the loop
    // would wait for it forever); a write in progress still completes.
    const closing = this.file.close();
    await this.running?.catch(() => undefined);
    if (!this.finished && this.running) await this.persist().catch((err) => this.log.warn({ err }, "cannot checkpoint the log position"));
    await closing;
  }

  /** The state to save now; `done` when all output is in the file. */
  protected abstract checkpoint(done: boolean): FollowState;

  /**
   * Whether the source position and the CRI file's size agree now. While a
   * resumed follower is still passing over output an earlier run already
   * wrote, the file holds records the position does not cover yet; a
   * checkpoint then would make the next start write them again.
   */
  protected checkpointable(): boolean {
    return true;
  }

  /**
   * After a write: checkpoints when the last checkpoint is older than
   * PERSIST_INTERVAL_MS, and otherwise once that much time has passed, so a
   * follower whose container went quiet never keeps a checkpoint behind its
   * file (a stale one would name a Docker file that may be rotated away by
   * the next start).
   */
  protected async persistIfDue(): Promise<void> {
    this.dirty = true;
    const since = Date.now() - this.lastPersist;
    if (since >= PERSIST_INTERVAL_MS) {
      await this.persist();
      return;
    }
    if (this.trailing || this.abort.signal.aborted) return;
    this.trailing = setTimeout(() => {
      this.trailing = undefined;
      if (this.abort.signal.aborted || !this.dirty) return;
      this.persistIfDue().catch((err) => this.log.warn({ err }, "cannot checkpoint the log position"));
    }, PERSIST_INTERVAL_MS - since);
    this.trailing.unref?.();
  }

  /** Checkpoints one at a time (the run loop, reopen and stop all do). */
  protected persist(done = false): Promise<void> {
    const run = this.persisting.then(() => this.save(done));
    this.persisting = run.catch(() => undefined);
    return run;
  }

  private async save(done: boolean): Promise<void> {
    if (!this.checkpointable()) return;
    this.lastPersist = Date.now();
    this.dirty = false;
    await this.options.store.save(this.checkpoint(done));
  }
}

/**
 * Waits `ms`, or less when `signal` aborts. The abort listener is removed when
 * the timer fires: a follower waits thousands of times on one signal, and
 * listeners left behind would pile up on it.
 */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
