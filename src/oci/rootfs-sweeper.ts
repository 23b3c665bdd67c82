/**
 * The periodic sweep of the layer's rootfs directory (idmapped-rootfs.ts
 * sweepRootfs): at cridock's start and every few minutes after, the
 * directory of each container that Docker no longer runs and whose create
 * is long over is released. Normally nothing is there: the launcher's
 * `delete` removes each container's directory, and the mounts themselves
 * never leave the create's own mount namespace. What the sweep finds was
 * left by a delete that never came (dockerd or containerd killed, a failed
 * create whose runtime cleanup did not run), or by a container of the
 * launcher of format 2, whose mounts were the host's.
 *
 * Cost while idle: one readdir per period, on an unref'd timer (the
 * process never stays up for it); Docker is asked only about directories
 * older than the age. Each container's failure is logged on its own and
 * counted; the sweep goes on past it.
 */
import type { Logger } from "../log.ts";
import type { OciLayer } from "./layer.ts";
import { sweepRootfs } from "./idmapped-rootfs.ts";

/** Process-wide totals, monotonic; metrics/ reads them at scrape time. */
export const rootfsSweepTotals = {
  /** Container directories the sweep released. */
  released: 0,
  /** Container directories it could not release (each attempt counts). */
  errors: 0,
};

/** How often the sweep runs after the one at start. */
export const SWEEP_INTERVAL_MS = 5 * 60_000;
/**
 * How old a container's directory must be before the sweep may take it: far
 * longer than any create (cridock's runtime request timeout is minutes), so
 * a create under way is never swept from under its runtime.
 */
export const SWEEP_AGE_MS = 15 * 60_000;

export interface RootfsSweeperOptions {
  /** The layer as dockerd has it now (registration can change while cridock runs). */
  layer: () => Promise<OciLayer | undefined>;
  /** Whether Docker runs the container; true when dockerd cannot say (it may still run it, live-restore). */
  running: (id: string) => Promise<boolean>;
  log: Logger;
  intervalMs?: number;
  ageMs?: number;
}

export class RootfsSweeper {
  private timer?: ReturnType<typeof setInterval>;
  private sweeping?: Promise<void>;
  private readonly log: Logger;

  constructor(private readonly options: RootfsSweeperOptions) {
    this.log = options.log.child({ component: "oci-rootfs-sweep" });
  }

  /** Sweeps now, then every interval until stop(). */
  start(): void {
    void this.sweep();
    this.timer = setInterval(() => void this.sweep(), this.options.intervalMs ?? SWEEP_INTERVAL_MS);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One sweep; a sweep still running when the next is due is not doubled. */
  sweep(): Promise<void> {
    this.sweeping ??= this.sweepOnce().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    let layer: OciLayer | undefined;
    try {
      layer = await this.options.layer();
    } catch (err) {
      this.log.warn({ err }, "could not ask dockerd for the OCI runtime layer to sweep what it left");
      return;
    }
    if (!layer?.rootfsDir) return;
    let result;
    try {
      result = await sweepRootfs(layer.rootfsDir, this.options.ageMs ?? SWEEP_AGE_MS, this.options.running);
    } catch (err) {
      rootfsSweepTotals.errors++;
      this.log.warn({ rootfsDir: layer.rootfsDir, err }, "could not sweep the OCI layer's rootfs directory");
      return;
    }
    rootfsSweepTotals.released += result.released.length;
    rootfsSweepTotals.errors += result.failed.length;
    if (result.released.length > 0) this.log.info({ released: result.released, rootfsDir: layer.rootfsDir }, "released the idmapped rootfs of containers that no longer run");
    for (const { id, error } of result.failed) {
      this.log.warn({ containerId: id, rootfsDir: layer.rootfsDir, err: error }, "could not release the idmapped rootfs of a container that no longer runs; the next sweep tries again");
    }
  }
}
