/**
 * Unmounting what a test environment left mounted under its own scratch
 * directory before removing it: kubelet bind-mounts its root directory onto
 * itself, and a dockerd that did not stop cleanly (or whose mount propagated
 * to a peer) leaves its exec root's netns/default. Only mounts at or below
 * `dir` are touched, deepest first, lazily.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

export function unmountUnder(dir: string): void {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((m) => m === dir || m.startsWith(dir + "/"))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      execFileSync("umount", ["-l", m], { stdio: "ignore" });
    } catch {
      // already gone
    }
  }
}
