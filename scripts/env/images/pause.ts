/**
 * The pause image's one file: a static pause binary compiled here from
 * pause/pause.c with gcc (gcc and libc6-dev are in env-setup's packages).
 * The same source and compiler give the same bytes, so the image id holds
 * across rebuilds.
 *
 * Why a compiled pause and not a shell: the sandbox's pid 1 must reap the
 * orphans re-parented to it when a pod shares its pid namespace, and must
 * exit 0 at once on SIGTERM and SIGINT; a shell blocked in `read` does the
 * second but not the first. It also holds no other process a container
 * sharing the pod's pid namespace would see (critest's ExecSync timeout spec
 * checks that `pgrep sleep` finds nothing).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LayerEntry } from "./layer.ts";

const SOURCE = join(import.meta.dirname, "pause", "pause.c");

export function pauseEntries(): LayerEntry[] {
  const dir = mkdtempSync(join(tmpdir(), "cridock-pause-"));
  try {
    const binary = join(dir, "pause");
    try {
      execFileSync("gcc", ["-static", "-O2", "-s", "-Wall", "-Wextra", "-Werror", "-o", binary, SOURCE], { stdio: "pipe" });
    } catch (err) {
      const e = err as { stderr?: Buffer };
      throw new Error(`gcc -static could not build ${SOURCE}: ${e.stderr?.toString().trim() ?? ""}`, { cause: err });
    }
    return [{ kind: "file", path: "/pause", content: readFileSync(binary), mode: 0o755 }];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
