/**
 * What a cgroup's processes hold, counted in /proc as cAdvisor counts it:
 * the open file descriptors of every process in the cgroup (the entries of
 * /proc/<pid>/fd) and how many of them are sockets (their link reads
 * "socket:[inode]"), and, where the pids controller cannot say, the threads
 * (the entries of /proc/<pid>/task).
 *
 * Cost: one directory listing per process and one readlink per descriptor,
 * all on kernel-generated files (no disk), on the calling thread for the
 * same reason as kernel-file.ts. A container holding 10,000 descriptors
 * costs about 10,000 readlinks (a few ms of CPU); callers bound how often
 * they ask (runtime/pod-metrics.ts keeps an answer for 10 s). A process that
 * exits during the walk is skipped, as in cAdvisor.
 */
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { readKernelFile } from "./kernel-file.ts";

export interface DescriptorCounts {
  fds: bigint;
  sockets: bigint;
}

/** The pids of cgroup.procs (one decimal pid a line); [] when the file cannot be read. */
export async function readCgroupProcs(cgroupDir: string): Promise<number[]> {
  let text: string;
  try {
    text = await readKernelFile(join(cgroupDir, "cgroup.procs"));
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const line of text.split("\n")) {
    const s = line.trim();
    // Only a plain positive decimal names a /proc entry: anything else must not become a path.
    if (/^[1-9]\d{0,9}$/.test(s)) pids.push(Number(s));
  }
  return pids;
}

function list(dir: string): string[] | undefined {
  try {
    return readdirSync(dir);
  } catch {
    return undefined;
  }
}

/** Open descriptors and sockets of these processes, summed. */
export function countDescriptors(pids: readonly number[], proc = "/proc"): DescriptorCounts {
  let fds = 0n;
  let sockets = 0n;
  for (const pid of pids) {
    const dir = join(proc, String(pid), "fd");
    const entries = list(dir);
    if (!entries) continue; // exited, or not ours to read
    fds += BigInt(entries.length);
    for (const fd of entries) {
      try {
        if (readlinkSync(join(dir, fd)).startsWith("socket:")) sockets++;
      } catch {
        // closed since the listing
      }
    }
  }
  return { fds, sockets };
}

/** Threads of these processes, summed (entries of /proc/<pid>/task). */
export function countThreads(pids: readonly number[], proc = "/proc"): bigint {
  let threads = 0n;
  for (const pid of pids) threads += BigInt(list(join(proc, String(pid), "task"))?.length ?? 0);
  return threads;
}
