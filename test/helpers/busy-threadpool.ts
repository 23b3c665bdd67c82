/**
 * Holds every thread of libuv's threadpool busy, as slow disk I/O or a
 * flood of file operations would: each thread blocks in open(2) of a FIFO
 * that has no writer. Work queued meanwhile waits until release(), so a
 * check that must not depend on the pool can be told from one that does.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { mkdtemp, open, rm, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface BusyThreadpool {
  /** Lets the blocked opens complete and closes them. */
  release(): Promise<void>;
}

export async function occupyThreadpool(): Promise<BusyThreadpool> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-busy-pool-"));
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  // libuv's default is 4; the launchers set 16. Every thread gets one open.
  const threads = Math.max(4, Number(process.env.UV_THREADPOOL_SIZE ?? 4) || 4);
  const opens: Promise<FileHandle>[] = Array.from({ length: threads }, () => open(fifo, "r"));
  // Give the pool's threads time to pick the opens up and block in them.
  await new Promise((resolve) => setTimeout(resolve, 200));
  return {
    async release() {
      // A writer's open completes every reader's (readers waiting count as readers, so O_NONBLOCK succeeds).
      const writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      const handles = await Promise.all(opens);
      closeSync(writer);
      await Promise.all(handles.map((h) => h.close()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `promise`'s value, or "timed out" after `ms`. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | "timed out"> {
  return Promise.race([promise, new Promise<"timed out">((resolve) => setTimeout(() => resolve("timed out"), ms).unref())]);
}
