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

  /** Rotation: the next record goes to a new file at the same path. */
  async reopen(): Promise<void> {
    await this.file.reopen();
    await this.persist();
  }

  /** Stops following; keeps the checkpoint so a later start can resume. */
  async stop(): Promise<void> {
    this.abort.abort();
    // Closing first ends a write stuck retrying on a full disk (the loop
    // would wait for it forever); a write in progress still completes.
    const closing = this.file.close();
    await this.running?.catch(() => undefined);
    if (!this.finished && this.running) await this.persist().catch((err) => this.log.warn({ err }, "cannot checkpoint the log position"));
    await closing;
  }

  /** The state to save now; `done` when all output is in the file. */
  protected abstract checkpoint(done: boolean): FollowState;

  /** Checkpoints when the last one is older than PERSIST_INTERVAL_MS. */
  protected async persistIfDue(): Promise<void> {
    if (Date.now() - this.lastPersist >= PERSIST_INTERVAL_MS) await this.persist();
  }

  /** Checkpoints one at a time (the run loop, reopen and stop all do). */
  protected persist(done = false): Promise<void> {
    const run = this.persisting.then(() => this.save(done));
    this.persisting = run.catch(() => undefined);
    return run;
  }

  private async save(done: boolean): Promise<void> {
    this.lastPersist = Date.now();
    await this.options.store.save(this.checkpoint(done));
  }
}

/** Waits `ms`, or less when `signal` aborts. */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
