/**
 * Whether a followed container has exited, asked of Docker as seldom as
 * possible: after Docker's die event it is asked; otherwise (a safety poll,
 * dockerd rewriting the container's state file) a live pid in /proc
 * answers, and Docker is asked only when the pid cannot be seen (gone, or in
 * another pid namespace) or now and then to rule out a reused pid.
 */
import { existsSync } from "node:fs";
import type { DockerClient } from "../docker/client.ts";
import { isNotFound } from "../docker/errors.ts";

/** While the container's process is visible in /proc, Docker is asked whether it exited this seldom (a reused pid). */
const CONFIRM_EXIT_MS = 15 * 60_000;

export class ContainerExitCheck {
  private pid = 0;
  private lastInspect = 0;
  /** Docker reported the container's end since the last check. */
  private reported = false;

  constructor(
    private readonly docker: Pick<DockerClient, "inspectContainer">,
    private readonly containerId: string,
  ) {}

  /** What an inspect just told: the process to look for in /proc. */
  noteInspect(running: boolean, pid: number): void {
    this.pid = running ? pid : 0;
    this.lastInspect = Date.now();
  }

  /** Docker reported the container's end: the next check asks Docker. */
  report(): void {
    this.reported = true;
  }

  /** An end was reported that no check has asked Docker about yet. */
  get pending(): boolean {
    return this.reported;
  }

  /**
   * A safety poll's check, without a promise: true when no end was
   * reported and the container's process is still in /proc. False means
   * "ask exited()".
   */
  runningSync(): boolean {
    return !this.reported && this.pid > 0 && Date.now() - this.lastInspect < CONFIRM_EXIT_MS && processExists(this.pid);
  }

  async exited(): Promise<boolean> {
    // Read before the report is consumed: a reported end always goes to Docker.
    const running = this.runningSync();
    this.reported = false;
    if (running) return false;
    this.lastInspect = Date.now();
    try {
      const inspect = await this.docker.inspectContainer(this.containerId);
      if (inspect.State.Running) {
        // A pid this process cannot see (another pid namespace) is no use.
        this.pid = processExists(inspect.State.Pid) ? inspect.State.Pid : 0;
        return false;
      }
      return true;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
  }
}

/**
 * Whether /proc shows the process: one access(2) of procfs on the calling
 * thread, which the kernel answers from memory. A
 * stat through fs/promises was a round of libuv's threadpool: while kubelet
 * deleted 30 pods on two saturated cores the event loop once waited 46 ms
 * just to queue it (the pool's queue is shared by every file operation).
 */
function processExists(pid: number): boolean {
  return existsSync(`/proc/${pid}`);
}
