/**
 * scripts/bench/lib/proc-usage.ts's resident split: a process's RSS by
 * backing, its own executable's pages apart from other files, read from a
 * real idle process's /proc/<pid>/smaps and from a fixed text.
 */
import t from "tap";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { residentSplit, splitSmaps } from "../../scripts/bench/lib/proc-usage.ts";

const SMAPS = `00400000-0082f000 r--p 00000000 fe:00 1234                               /usr/bin/cridock
Size:               4284 kB
Rss:                4000 kB
Anonymous:             0 kB
0082f000-034ce000 r-xp 0042f000 fe:00 1234                               /usr/bin/cridock
Rss:               20000 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:00 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1000 kB
Anonymous:             0 kB
25b0a000-25d70000 rw-p 00000000 00:00 0                                  [heap]
Rss:                3000 kB
Anonymous:          3000 kB
7f2707dc0000-7f2707fd5000 rw-p 00000000 00:00 0 
Rss:                2048 kB
Anonymous:          2048 kB
`;

t.test("a fixed smaps: anonymous, the executable's own pages, other files", async (t) => {
  const split = splitSmaps(SMAPS, "/usr/bin/cridock");
  t.equal(split.rss * 1024, 30048);
  t.equal(split.anonymous * 1024, 5048);
  t.equal(split.fileBacked * 1024, 25000);
  t.equal(split.ownExecutable * 1024, 24000, "both mappings of /usr/bin/cridock, not libc's");
  t.equal(splitSmaps(SMAPS, "/usr/bin/other").ownExecutable, 0, "another executable's path matches none");
});

t.test("a real idle process: the parts add up to smaps_rollup's RSS, its own pages among them", async (t) => {
  // node asleep on a timer: nothing moves its memory between the two reads.
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1e6)"], { stdio: "ignore", env: { PATH: process.env.PATH ?? "" } });
  t.teardown(() => void child.kill("SIGKILL"));
  await new Promise((r) => setTimeout(r, 500));
  const split = await residentSplit(child.pid!);
  const rollupKb = Number(/^Rss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${child.pid}/smaps_rollup`, "utf8"))![1]);
  t.ok(Math.abs(split.rss * 1024 - rollupKb) <= 64, `split ${split.rss.toFixed(1)} MB, rollup ${(rollupKb / 1024).toFixed(1)} MB`);
  t.ok(split.ownExecutable > 5, `node's own pages: ${split.ownExecutable.toFixed(1)} MB`);
  t.ok(split.ownExecutable <= split.fileBacked);
});
