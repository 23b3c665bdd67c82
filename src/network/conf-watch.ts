/**
 * When to reload the CNI network config: on a change in --cni-conf-dir
 * (inotify through fs.watch, Node and Deno 2), and on a safety timer that is
 * quick while no valid config is loaded (the node waits for its network to
 * come up; a missing directory cannot be watched yet) and slow once one is,
 * so a node with a working network rereads nothing every few seconds.
 */
import { watch, type FSWatcher } from "node:fs";
import type { Logger } from "../log.ts";

export interface ConfWatchOptions {
  dir: string;
  /** Reloads the config; resolves to whether a valid one is in use. */
  reload: () => Promise<boolean>;
  log: Logger;
  /** Safety reload while no valid config is loaded, and once one is. */
  pollMs?: { notReady: number; ready: number };
}

/** Changes come in bursts (an editor's temp file and rename): reload once they settle. */
const DEBOUNCE_MS = 100;

export class ConfWatch {
  private watcher: FSWatcher | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private debounce: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly pollMs: { notReady: number; ready: number };

  constructor(private readonly options: ConfWatchOptions) {
    this.pollMs = options.pollMs ?? { notReady: 2_000, ready: 60_000 };
  }

  /** Loads now, then keeps the config current. */
  async start(): Promise<void> {
    await this.reloadNow();
  }

  get watching(): boolean {
    return this.watcher !== undefined;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.debounce);
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** One reload at a time; the next safety reload is timed from its outcome. */
  private reloadNow(): Promise<void> {
    this.running = this.running.then(async () => {
      if (this.closed) return;
      clearTimeout(this.timer);
      // A directory that appeared (or came back) since the last try is watched from now on.
      if (!this.watcher) this.openWatch();
      const ready = await this.options.reload().catch(() => false);
      if (this.closed) return;
      if (!ready) {
        // A watch on a directory that was removed reports nothing when it comes back: watch afresh next time.
        this.watcher?.close();
        this.watcher = undefined;
      }
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.reloadNow(), ready && this.watcher ? this.pollMs.ready : this.pollMs.notReady);
      this.timer.unref?.();
    });
    return this.running;
  }

  private openWatch(): void {
    let watcher: FSWatcher;
    try {
      watcher = watch(this.options.dir, { persistent: false }, () => {
        clearTimeout(this.debounce);
        this.debounce = setTimeout(() => void this.reloadNow(), DEBOUNCE_MS);
        this.debounce.unref?.();
      });
    } catch {
      // Not there yet (or no inotify): the quick safety reload tries again.
      return;
    }
    watcher.on("error", (err) => {
      // The directory is missing (Deno reports that here, not by throwing), was
      // removed, or the watch broke: back to the quick timer, which watches
      // again once it can. Not a reload now: that would open the failing watch
      // again at once, in a loop.
      watcher.close();
      if (this.watcher !== watcher || this.closed) return;
      this.options.log.debug({ err, dir: this.options.dir }, "the watch on the CNI config directory ended");
      this.watcher = undefined;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.reloadNow(), this.pollMs.notReady);
      this.timer.unref?.();
    });
    this.watcher = watcher;
  }
}
