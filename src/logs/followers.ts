/**
 * The log followers of all containers: started when a container starts,
 * resumed when cridock starts, stopped and forgotten when the container is
 * removed (the CRI log file itself stays: kubelet owns it).
 *
 * A container logging with json-file (every container cridock creates) is
 * read from Docker's log file on disk (file-follower.ts); any other driver
 * (containers made by other tools) through Docker's log API (follower.ts).
 *
 * Docker's die events end a file follower's wait for more output at once;
 * after the event stream was down, every follower checks (it may have
 * missed one). Between events a follower only sleeps.
 */
import { join } from "node:path";
import type { DockerClient } from "../docker/client.ts";
import { isNotFound } from "../docker/errors.ts";
import type { Logger } from "../log.ts";
import { JsonFileFollower } from "./file-follower.ts";
import { LogFollower } from "./follower.ts";
import { FollowStateStore, UnreadableFollowState, type FollowState } from "./resume.ts";

/** What both kinds of follower offer. */
interface Follower {
  readonly done: boolean;
  startFresh(): Promise<void>;
  resume(state: FollowState): Promise<void>;
  wait(): Promise<void>;
  reopen(): Promise<void>;
  stop(): Promise<void>;
  checkExit(): void;
}

export class LogFollowers {
  private readonly followers = new Map<string, Follower>();
  private readonly store: FollowStateStore;
  private readonly log: Logger;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(
    private readonly docker: DockerClient,
    rootDirectory: string,
    logger: Logger,
  ) {
    this.store = new FollowStateStore(join(rootDirectory, "logs"));
    this.log = logger.child({ component: "log-followers" });
    this.unsubscribe.push(
      docker.events.subscribe((event) => {
        if (event.action === "die") this.followers.get(event.id)?.checkExit();
      }),
      docker.events.onConnection((connected) => {
        if (!connected) return;
        for (const follower of this.followers.values()) follower.checkExit();
      }),
    );
  }

  /**
   * Creates the (empty) log file and follows the container from its first
   * line; `logDriver` is the container's HostConfig.LogConfig.Type.
   */
  async start(containerId: string, logPath: string, tty: boolean, logDriver = "json-file"): Promise<void> {
    await this.forget(containerId);
    const follower = this.make(containerId, logPath, tty, logDriver === "json-file" ? "json-file" : "api");
    await follower.startFresh();
    this.followers.set(containerId, follower);
  }

  /** Creates the log file without following (a container whose start failed still gets its file). */
  async touch(containerId: string, logPath: string): Promise<void> {
    const follower = new LogFollower({ docker: this.docker, store: this.store, logger: this.log, containerId, logPath, tty: false });
    await follower.file.open();
    await follower.file.close();
  }

  /**
   * Followers held: `copying` a running container's output, `done` with an
   * exited one's and kept until the container is removed (for metrics).
   */
  counts(): { copying: number; done: number } {
    let done = 0;
    for (const follower of this.followers.values()) if (follower.done) done++;
    return { copying: this.followers.size - done, done };
  }

  /** Whether a follower is still copying this container's output. */
  isFollowing(containerId: string): boolean {
    const follower = this.followers.get(containerId);
    return follower !== undefined && !follower.done;
  }

  async reopen(containerId: string): Promise<boolean> {
    const follower = this.followers.get(containerId);
    if (!follower || follower.done) return false;
    await follower.reopen();
    return true;
  }

  /** Resolves once the container's output is all in its file (tests, shutdown). */
  async drained(containerId: string): Promise<void> {
    await this.followers.get(containerId)?.wait();
  }

  /** Stops following and deletes the checkpoint. */
  async forget(containerId: string): Promise<void> {
    const follower = this.followers.get(containerId);
    this.followers.delete(containerId);
    await follower?.stop();
    await this.store.remove(containerId);
  }

  /**
   * Resumes every follower whose container still exists and whose output was
   * not all copied yet; drops checkpoints of containers that are gone.
   */
  async resumeAll(): Promise<number> {
    let resumed = 0;
    for (const id of await this.store.list()) {
      const state = await this.store.load(id).catch(async (err: unknown) => {
        if (!(err instanceof UnreadableFollowState)) throw err;
        // Where the follower was is lost: its output from here on would be a guess.
        const aside = await this.store.setAside(id);
        this.log.warn({ containerId: id, setAside: aside, err }, "set aside an unreadable log position: this container's output is no longer copied to its CRI log");
        return undefined;
      });
      if (!state) {
        await this.store.remove(id);
        continue;
      }
      const exists = await this.docker.inspectContainer(id).then(
        () => true,
        (err) => (isNotFound(err) ? false : Promise.reject(err)),
      );
      if (!exists) {
        await this.store.remove(id);
        continue;
      }
      if (state.done || this.followers.has(id)) continue;
      const follower = this.make(id, state.logPath, state.tty, state.kind ?? "api");
      await follower.resume(state);
      this.followers.set(id, follower);
      resumed++;
    }
    if (resumed > 0) this.log.info({ resumed }, "resumed container log followers");
    return resumed;
  }

  /** Stops every follower, keeping checkpoints (cridock shutdown). */
  async stopAll(): Promise<void> {
    for (const off of this.unsubscribe.splice(0)) off();
    const all = [...this.followers.values()];
    this.followers.clear();
    await Promise.all(all.map((f) => f.stop()));
  }

  /** Output Docker rotated away before a follower read it, over the followers running now. */
  lostOutput(): { events: number; bytes: number } {
    const total = { events: 0, bytes: 0 };
    for (const f of this.followers.values()) {
      if (f instanceof JsonFileFollower) {
        total.events += f.lost.events;
        total.bytes += f.lost.bytes;
      }
    }
    return total;
  }

  private make(containerId: string, logPath: string, tty: boolean, kind: "json-file" | "api"): Follower {
    const options = { docker: this.docker, store: this.store, logger: this.log, containerId, logPath, tty };
    return kind === "json-file" ? new JsonFileFollower(options) : new LogFollower(options);
  }
}
