/**
 * What a process costs, read from outside it: CPU seconds and resident
 * memory from /proc, and system calls per second counted with strace.
 * The benchmarks measure cridock and cri-dockerd the same way through these.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { readdir, readFile, readlink } from "node:fs/promises";

/** USER_HZ: the unit of utime and stime in /proc/<pid>/stat (100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system, all threads) the process has used so far. */
export async function cpuSeconds(pid: number): Promise<number> {
  return statSeconds(await readFile(`/proc/${pid}/stat`, "utf8"));
}

/**
 * CPU seconds of the process and of its live direct children (user +
 * system, all threads). cridock on Node forks CNI plugins, mount and
 * nsenter from a long-lived helper process (src/network/spawner.ts): its
 * fork costs are the helper's, not cridock's, and would go uncounted while
 * it lives (a parent's cutime counts only children it has reaped). A Go
 * runtime forks from its own process, where its CPU shows. The children
 * of those children (the plugins themselves) are counted for neither.
 * A child that ends between two readings drops out of the second: the
 * benchmarks read around whole phases, and the helper lives minutes.
 */
export async function treeCpuSeconds(pid: number): Promise<number> {
  let total = await cpuSeconds(pid);
  for (const child of await childPids(pid)) total += await cpuSeconds(child).catch(() => 0);
  return total;
}

/** The process's direct children now (from each thread's `children` list). */
export async function childPids(pid: number): Promise<number[]> {
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  const pids = new Set<number>();
  for (const tid of tasks) {
    const list = await readFile(`/proc/${pid}/task/${tid}/children`, "utf8").catch(() => "");
    for (const c of list.split(" ").filter(Boolean)) pids.add(Number(c));
  }
  return [...pids];
}

/** Resident memory now, in MB (VmRSS). */
export async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kb === undefined ? NaN : Number(kb) / 1024;
}

export interface SyscallCount {
  perSecond: number;
  /** The busiest calls, per second, most first. */
  top: { name: string; perSecond: number }[];
}

/**
 * Counts the process's system calls (all its threads) for `seconds` with
 * `strace -c -f -p`. Undefined when strace is missing or may not attach
 * (ptrace restrictions); the caller says so rather than printing a number.
 */
export function countSyscalls(pid: number, seconds: number): SyscallCount | undefined {
  let run = spawnSync("timeout", ["-s", "INT", String(seconds), "strace", "-c", "-f", "-p", String(pid)], { encoding: "utf8", maxBuffer: 16 << 20 });
  // An attach can fail while a thread is being created or ends; one more try.
  if (!run.error && !/\btotal\s*$/m.test(run.stderr)) {
    run = spawnSync("timeout", ["-s", "INT", String(seconds), "strace", "-c", "-f", "-p", String(pid)], { encoding: "utf8", maxBuffer: 16 << 20 });
  }
  if (run.error || !/\btotal\s*$/m.test(run.stderr)) {
    console.error(`strace -c -f -p ${pid} gave no count: ${run.error?.message ?? run.stderr.split("\n").filter((l) => !/detached|attached/.test(l)).slice(-3).join(" / ")}`);
    return undefined;
  }
  const rows: { name: string; calls: number }[] = [];
  let total = 0;
  for (const line of run.stderr.split("\n")) {
    const cols = line.trim().split(/\s+/);
    // "% time  seconds  usecs/call  calls  [errors]  syscall"
    if (cols.length < 5 || !/^\d+(\.\d+)?$/.test(cols[0]!)) continue;
    const calls = Number(cols[3]);
    const name = cols[cols.length - 1]!;
    if (name === "total") total = calls;
    else rows.push({ name, calls });
  }
  rows.sort((a, b) => b.calls - a.calls);
  return {
    perSecond: total / seconds,
    top: rows.slice(0, 5).map((r) => ({ name: r.name, perSecond: r.calls / seconds })),
  };
}

/** Resident memory split by backing (MB), from /proc/<pid>/smaps. */
export interface ResidentSplit {
  rss: number;
  /** Private and shared anonymous pages: V8's heap, malloc's arenas, thread stacks. */
  anonymous: number;
  /** Pages of mapped files: the process's own executable's text and data, shared libraries. */
  fileBacked: number;
  /**
   * Of fileBacked, the pages of the process's own executable (/proc/<pid>/exe): for cridock's
   * executable, Node's machine code, its read-only data (ICU, its JavaScript, V8's snapshot)
   * and the script's blob; for a Go runtime, its whole program.
   */
  ownExecutable: number;
}

/** The resident split of one /proc/<pid>/smaps text, for the executable at `exe`. */
export function splitSmaps(smaps: string, exe: string): ResidentSplit {
  let rssKb = 0;
  let anonymousKb = 0;
  let ownKb = 0;
  let own = false;
  for (const line of smaps.split("\n")) {
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields follow, "Name: N kB".
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ [0-9a-f]+ \S+ \d+\s*(.*)$/.exec(line);
    if (header) {
      own = header[1] === exe;
      continue;
    }
    const field = /^(Rss|Anonymous):\s+(\d+) kB/.exec(line);
    if (!field) continue;
    const kb = Number(field[2]);
    if (field[1] === "Anonymous") anonymousKb += kb;
    else {
      rssKb += kb;
      if (own) ownKb += kb;
    }
  }
  return { rss: rssKb / 1024, anonymous: anonymousKb / 1024, fileBacked: (rssKb - anonymousKb) / 1024, ownExecutable: ownKb / 1024 };
}

export async function residentSplit(pid: number): Promise<ResidentSplit> {
  // One read of each: the executable a process runs does not change, and smaps is taken whole.
  const [smaps, exe] = await Promise.all([readFile(`/proc/${pid}/smaps`, "utf8"), readlink(`/proc/${pid}/exe`)]);
  return splitSmaps(smaps, exe);
}

/** CPU seconds of a process by kind of thread, with its live direct children apart. */
export interface ThreadCpu {
  main: number;
  /** V8's platform workers: the garbage collector's and the compiler's background work. */
  v8Workers: number;
  /** Every other thread alive at the second reading: libuv's pool, Node's platform scheduler, worker threads. */
  other: number;
  /**
   * Threads that ended between the two readings: the process's own total
   * (which keeps an ended thread's time) less what the live threads account for.
   */
  ended: number;
  /** The live direct children (cridock's spawn helpers), all their threads. */
  children: number;
}

type ThreadKind = "main" | "v8Workers" | "other";

/** One reading of a process: its total, each live thread's time and kind, its live children's. */
export interface ThreadSample {
  process: number;
  threads: Map<number, { kind: ThreadKind; seconds: number }>;
  children: number;
}

/** node's --v8-pool-size default: the platform worker threads it starts right after the main thread. */
const V8_POOL_SIZE = 4;
/** The name Node (22 and later) gives V8's platform workers (/proc/<pid>/task/<tid>/comm). */
const V8_WORKER_NAME = "node-V8Worker";

/**
 * Reads the process's utime and stime and each thread's
 * (/proc/<pid>/task/<tid>/stat). Node 22 and later name V8's workers
 * (`node-V8Worker`); Node 20 names no thread, and there they are told by
 * their order: node starts them (four) before any other thread, so they
 * have the next thread ids after the main thread's.
 */
export function threadCpuSample(pid: number): ThreadSample {
  const sample: ThreadSample = { process: 0, threads: new Map(), children: 0 };
  let tids: number[] = [];
  try {
    sample.process = statSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"));
    tids = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .sort((a, b) => a - b);
  } catch {
    return sample;
  }
  const names = new Map(tids.map((tid) => [tid, readOr(`/proc/${pid}/task/${tid}/comm`).trim()]));
  const named = [...names.values()].includes(V8_WORKER_NAME);
  const children = new Set<number>();
  tids.forEach((tid, i) => {
    try {
      const seconds = statSeconds(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"));
      const v8Worker = named ? names.get(tid) === V8_WORKER_NAME : i <= V8_POOL_SIZE;
      sample.threads.set(tid, { kind: tid === pid ? "main" : v8Worker ? "v8Workers" : "other", seconds });
      for (const c of readOr(`/proc/${pid}/task/${tid}/children`).split(" ").filter(Boolean)) children.add(Number(c));
    } catch {
      // the thread ended meanwhile: the process's total keeps its time
    }
  });
  for (const child of children) {
    try {
      sample.children += statSeconds(readFileSync(`/proc/${child}/stat`, "utf8"));
    } catch {
      // ended meanwhile
    }
  }
  return sample;
}

/** A /proc file's text, or "" once what it describes has gone. */
function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/**
 * What the process spent between two readings, by kind of thread. A thread
 * alive at the second reading counts from the first (or from its start);
 * the time of one that ended in between is the `ended` remainder.
 */
export function threadCpuDelta(before: ThreadSample, after: ThreadSample): ThreadCpu {
  const out: ThreadCpu = { main: 0, v8Workers: 0, other: 0, ended: 0, children: after.children - before.children };
  for (const [tid, thread] of after.threads) out[thread.kind] += thread.seconds - (before.threads.get(tid)?.seconds ?? 0);
  // Rounded to the tick: the readings are whole ticks, and their sums are not exact in floating point.
  out.ended = Math.max(0, Math.round((after.process - before.process - out.main - out.v8Workers - out.other) * TICKS_PER_SECOND) / TICKS_PER_SECOND);
  return out;
}

/** utime + stime of a stat line, in seconds (the command name may hold spaces and parentheses: fields start after the last ") "). */
function statSeconds(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

export function formatThreadCpu(t: ThreadCpu): string {
  return `main thread ${t.main.toFixed(2)} s, V8 workers ${t.v8Workers.toFixed(2)} s, other threads ${t.other.toFixed(2)} s, threads that ended ${t.ended.toFixed(2)} s, helper processes ${t.children.toFixed(2)} s`;
}
