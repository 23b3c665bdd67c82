/**
 * A lock file that keeps cridock's own runs from interleaving their
 * read-merge-write of one file (daemon.json: `cridock oci-layer install`
 * from a package's postinst, an uninstall, and the server's re-registration
 * may run at once).
 *
 * Why this scheme: Node (and Deno's node: layer) has no flock(2), and a
 * lock that a crashed holder leaves behind must not wedge the node forever.
 * - Taking it is atomic and never shows a half-written lock: the holder's
 *   identity is written to a private temporary file first, which is then
 *   hard-linked to the lock's name; link(2) fails with EEXIST when the name
 *   exists, as O_CREAT|O_EXCL does, and a reader sees a complete file or none.
 * - The identity is `<pid> <start time>` (the start time from
 *   /proc/<pid>/stat, in clock ticks since boot), so a lock whose holder is
 *   gone is told apart from one whose pid a new process has reused.
 * - A stale lock is removed by one waiter at a time: the one that holds the
 *   break lock (`<lock>.break`, taken with link(2) too), which checks that
 *   the lock's name still names the very file (device and inode) it found
 *   stale before it unlinks it. Holders never touch the break lock and a
 *   new lock is only ever linked into an empty name, so what it unlinks is
 *   the stale file, never a fresh lock of another waiter. A break lock is
 *   held for a few system calls; one older than 10 s was left by a breaker
 *   that died in them, and is removed.
 * - A live holder is waited for, up to a bound; then the wait fails naming
 *   the holder's pid, for the operator to look at.
 */
import { link, lstat, readFile, rm, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import process from "node:process";
import { tempNameFor } from "./replace-file.ts";

export interface LockOptions {
  /** How long to wait for a live holder (default 30 s). */
  timeoutMs?: number;
  /** Between two tries (default 50 ms). */
  pollMs?: number;
}

interface Holder {
  pid: number;
  /** Start time from /proc/<pid>/stat; undefined where it cannot be read. */
  start?: string;
}

/** A process's start time (field 22 of /proc/<pid>/stat), or undefined when there is no such process. */
async function startTime(pid: number): Promise<string | undefined> {
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces or ")": fields follow the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19];
}

function parseHolder(text: string): Holder | undefined {
  const m = /^(\d{1,10})(?: (\d{1,20}))?\n?$/.exec(text);
  if (!m) return undefined;
  return { pid: Number(m[1]), start: m[2] };
}

/** Whether the process that wrote `holder` still runs (the same process, not a reuse of its pid). */
async function alive(holder: Holder): Promise<boolean> {
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  if (holder.start === undefined) return true;
  const now = await startTime(holder.pid);
  return now === undefined || now === holder.start;
}

async function ownIdentity(): Promise<string> {
  const start = await startTime(process.pid);
  return start === undefined ? `${process.pid}\n` : `${process.pid} ${start}\n`;
}

/** Takes the lock at `lockPath`, runs `fn`, and releases the lock, whatever `fn` did. */
export async function withFileLock<T>(lockPath: string, fn: () => Promise<T>, options: LockOptions = {}): Promise<T> {
  const release = await acquire(lockPath, options);
  try {
    return await fn();
  } finally {
    await release();
  }
}

async function acquire(lockPath: string, options: LockOptions): Promise<() => Promise<void>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const pollMs = options.pollMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  const mine = tempNameFor(lockPath);
  await writeFile(mine, await ownIdentity(), { flag: "wx", mode: 0o600 });
  try {
    for (;;) {
      try {
        await link(mine, lockPath);
        const ours = await lstat(lockPath);
        return async () => {
          // Only our own file goes: a lock taken over from us (we were stopped past its staleness) stays its new holder's.
          const now = await lstat(lockPath).catch(() => undefined);
          if (now && now.ino === ours.ino && now.dev === ours.dev) await rm(lockPath, { force: true });
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const holder = await takeOverIfStale(lockPath, mine);
      if (holder === "taken-over") continue;
      if (Date.now() > deadline) {
        const who = holder ? `process ${holder.pid}` : "an unknown process";
        throw new Error(`${lockPath} is held by ${who} for more than ${Math.round(timeoutMs / 1000)} s: another cridock run is changing the same file; wait for it, or remove the lock if that process is not cridock`);
      }
      await sleep(pollMs);
    }
  } finally {
    await rm(mine, { force: true });
  }
}

/** A break lock older than this was left by a breaker that died (a break is a few system calls). */
const BREAK_LOCK_STALE_MS = 10_000;

/** "taken-over" when the lock was stale and is gone now (or went meanwhile); otherwise its live holder (undefined when unknown or the break is another waiter's). */
async function takeOverIfStale(lockPath: string, mine: string): Promise<Holder | undefined | "taken-over"> {
  const before = await lstat(lockPath).catch(() => undefined);
  if (!before) return "taken-over";
  const text = await readFile(lockPath, "utf8").catch(() => undefined);
  if (text === undefined) return "taken-over";
  const holder = parseHolder(text);
  // A lock file cridock did not write (or a symlink) is never taken over: the operator decides.
  if (!holder || !before.isFile()) return undefined;
  if (await alive(holder)) return holder;
  const breakPath = `${lockPath}.break`;
  try {
    await link(mine, breakPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    const other = await lstat(breakPath).catch(() => undefined);
    // ctime: link(2) sets it when the break lock is taken (the file's mtime is older: it was written when its waiter began).
    if (other && Date.now() - other.ctimeMs > BREAK_LOCK_STALE_MS) await rm(breakPath, { force: true });
    return undefined;
  }
  const ours = await lstat(breakPath);
  try {
    const now = await lstat(lockPath).catch(() => undefined);
    if (now && now.ino === before.ino && now.dev === before.dev) await rm(lockPath, { force: true });
  } finally {
    const still = await lstat(breakPath).catch(() => undefined);
    if (still && still.ino === ours.ino && still.dev === ours.dev) await rm(breakPath, { force: true });
  }
  return "taken-over";
}
