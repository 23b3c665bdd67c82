/**
 * Disk usage of containers' writable layers, measured by walking the overlay
 * upper directory ourselves — never with Docker's `?size=1`, which walks it
 * inside dockerd and blocks other API calls. Results are cached and refreshed
 * in the background, one walk at a time. How often a layer is walked again
 * follows what the walk costs: a small layer every few seconds, a layer whose
 * walk takes 100 ms at most every 10 s, a huge one rarely — so the walker
 * spends at most ~1% of one core however many files containers write.
 */
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

export interface DiskUsage {
  bytes: bigint;
  /** undefined when the size came from Docker (SizeRw), which counts no inodes. */
  inodes: bigint | undefined;
  /** When the walk finished, ns since the epoch. */
  measuredAt: bigint;
  /** How long the walk took, ms. */
  walkMs: number;
}

/** Sums allocated bytes (st_blocks) and inodes under a directory, not following links. */
export async function walkUsage(dir: string): Promise<{ bytes: bigint; inodes: bigint }> {
  let bytes = 0n;
  let inodes = 0n;
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop()!;
    let entries;
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch {
      continue; // removed while we walked
    }
    for (const entry of entries) {
      const path = join(current, entry.name);
      const st = await lstat(path, { bigint: true }).catch(() => undefined);
      if (!st) continue;
      inodes += 1n;
      bytes += st.blocks * 512n;
      if (entry.isDirectory()) pending.push(path);
    }
  }
  return { bytes, inodes };
}

export class DiskUsageCache {
  private readonly usage = new Map<string, DiskUsage>();
  private readonly queued = new Set<string>();
  private queue: Promise<void> = Promise.resolve();

  /** Layers are walked again after max(minRefreshMs, walk time × costFactor). */
  constructor(
    private readonly minRefreshMs = 5_000,
    private readonly costFactor = 100,
  ) {}

  /**
   * The last measurement of `dir`, scheduling a new one when it is stale.
   * The first request for a layer waits (up to waitMs) for its first walk.
   */
  async get(dir: string, waitMs = 1000): Promise<DiskUsage | undefined> {
    const known = this.usage.get(dir);
    const refreshMs = known ? Math.max(this.minRefreshMs, known.walkMs * this.costFactor) : 0;
    const stale = !known || Date.now() - Number(known.measuredAt / 1_000_000n) > refreshMs;
    if (stale) {
      const walk = this.schedule(dir);
      if (!known) {
        await Promise.race([walk, new Promise((r) => setTimeout(r, waitMs).unref())]);
      }
    }
    return this.usage.get(dir);
  }

  /** Drops layers that are no longer in use. */
  retain(dirs: Set<string>): void {
    for (const dir of this.usage.keys()) if (!dirs.has(dir)) this.usage.delete(dir);
  }

  private schedule(dir: string): Promise<void> {
    if (this.queued.has(dir)) return this.queue;
    this.queued.add(dir);
    this.queue = this.queue.then(async () => {
      try {
        const started = performance.now();
        const { bytes, inodes } = await walkUsage(dir);
        const walkMs = performance.now() - started;
        this.usage.set(dir, { bytes, inodes, measuredAt: BigInt(Date.now()) * 1_000_000n, walkMs });
      } finally {
        this.queued.delete(dir);
      }
    });
    return this.queue;
  }
}
