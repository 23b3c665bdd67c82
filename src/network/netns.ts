/**
 * Persistent handles of pod network namespaces: /proc/<pid>/ns/net
 * bind-mounted onto a file under <root>/netns, so the namespace (and the
 * CNI plugins' view of it) outlives the pause process. CNI DEL then always
 * has a namespace to work on and IPs are never leaked. Uses util-linux
 * mount/umount rather than a native addon.
 */
import { statfsSync } from "node:fs";
import { mkdir, open, readdir, readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { CridockError } from "../errors.ts";
import { runProcess } from "./spawner.ts";

/** Runs mount/umount off the main thread (spawner.ts); rejects with its stderr. */
async function run(command: string, args: string[]): Promise<void> {
  const r = await runProcess({ command, args, timeoutMs: 30_000 });
  if (r.code === 0 && !r.killedFor && !r.spawnError) return;
  const why = r.killedFor ?? r.spawnError?.message ?? `exit status ${r.code ?? r.signal}`;
  throw new Error(`${command} ${args.join(" ")}: ${r.stderr.trim() || why}`);
}

/** Bind-mounts the network namespace of `pid` onto `path`. */
export async function pinNetns(pid: number, path: string): Promise<void> {
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new CridockError("FAILED_PRECONDITION", `cannot pin the network namespace of pid ${pid}: the process is not running`);
  }
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const handle = await open(path, "w", 0o600);
  await handle.close();
  try {
    await run("mount", ["--bind", `/proc/${pid}/ns/net`, path]);
  } catch (err) {
    await rm(path, { force: true }).catch(() => undefined);
    throw new CridockError("INTERNAL", `pinning the network namespace of pid ${pid} at ${path}`, { cause: err });
  }
}

/** Unmounts and removes a handle; a handle that is absent or not mounted is fine. */
export async function unpinNetns(path: string): Promise<void> {
  if (!path) return;
  try {
    await run("umount", [path]);
  } catch (err) {
    const text = (err as Error).message;
    if (!/not mounted|no mount point|No such file|not found/i.test(text)) {
      throw new CridockError("INTERNAL", `unmounting network namespace handle ${path}`, { cause: err });
    }
  }
  await rm(path, { force: true });
}

/** statfs(2)'s f_type of the namespace filesystem (linux/magic.h NSFS_MAGIC). */
const NSFS_MAGIC = 0x6e736673;

/**
 * `path` when it still is a network namespace (a mounted handle, or a live
 * /proc/<pid>/ns/net), else "": an unmounted handle file, a gone process or
 * no path at all. The CNI spec has the runtime pass an empty CNI_NETNS to
 * DEL when the namespace no longer exists.
 *
 * One statfs(2) on the calling thread: it reads the superblock of nsfs (or
 * of the handle's directory) in memory, a few microseconds. Through
 * fs/promises it was a round of libuv's threadpool, whose queue every file
 * operation shares: in a 30-pod deletion, with the two cores saturated, a
 * profile found the event loop 69 ms inside `statfs`'s hand-over of that
 * round (such hand-overs of a `stat` were off the CPU and not runnable for
 * 43-51 ms, by schedstat: the pool's starved threads held its queue), and a
 * pool held by slow disk I/O would hold every DEL behind it.
 */
export async function liveNetns(path: string): Promise<string> {
  if (!path) return "";
  try {
    return statfsSync(path).type === NSFS_MAGIC ? path : "";
  } catch {
    return "";
  }
}

/** Handle files present in `dir` (for recovery). */
export async function listNetnsHandles(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).map((name) => join(dir, name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

/**
 * Whether the loopback device in the network namespace of `pid` is up with
 * 127.0.0.1, as Docker's network mode none leaves it. Read from procfs, no
 * process spawned: an up lo has joined the all-hosts group (it is listed in
 * net/igmp only while up), and the local route of 127.0.0.1 exists only once
 * the address is set. False when it cannot tell; the caller then runs the
 * loopback plugin.
 */
export async function loopbackIsUp(pid: number): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    const [igmp, trie] = await Promise.all([readFile(`/proc/${pid}/net/igmp`, "utf8"), readFile(`/proc/${pid}/net/fib_trie`, "utf8")]);
    return /^\d+\s+lo\s+:/m.test(igmp) && /\|-- 127\.0\.0\.1\n\s+\/32 host LOCAL/.test(trie);
  } catch {
    return false;
  }
}
