/**
 * Kills a host process and all its descendants. Docker has no API to kill an
 * exec'd process, but cridock runs as root in the host pid namespace, so the
 * exec's host pid (from exec inspect) can be signalled directly. Descendants
 * are found through /proc/<pid>/stat parent pids, so `sh -c 'sleep 99'`
 * takes its sleep with it.
 */
import { readdir, readFile } from "node:fs/promises";

/** Parent pid of every process, from /proc. */
async function parentMap(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  const entries = await readdir("/proc").catch(() => [] as string[]);
  await Promise.all(
    entries
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        const stat = await readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
        // Field 2 (comm) may hold spaces and parentheses: parse after the last ')'.
        const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const ppid = Number(rest[1]);
        if (!Number.isInteger(ppid)) return;
        const list = children.get(ppid) ?? [];
        list.push(Number(name));
        children.set(ppid, list);
      }),
  );
  return children;
}

/** `pid` and its descendants, parents first. */
export async function processTree(pid: number): Promise<number[]> {
  const children = await parentMap();
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift()!;
    if (out.includes(next)) continue;
    out.push(next);
    queue.push(...(children.get(next) ?? []));
  }
  return out;
}

/**
 * SIGKILLs `pid` and its descendants. The parent is stopped first (SIGSTOP)
 * so it cannot fork new children between the scan and the kill. Returns the
 * pids signalled. pid ≤ 1 is refused: that would be a bug, never a target.
 */
export async function killProcessTree(pid: number): Promise<number[]> {
  if (!Number.isInteger(pid) || pid <= 1) return [];
  try {
    process.kill(pid, "SIGSTOP");
  } catch {
    return []; // already gone
  }
  const pids = await processTree(pid);
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}
