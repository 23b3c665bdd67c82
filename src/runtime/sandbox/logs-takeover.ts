/**
 * The CRI logs of containers taken over from cri-dockerd. cri-dockerd makes
 * each container's CRI log file a symlink to Docker's json-file log; cridock
 * writes a CRI-format file of its own. The symlink is replaced, atomically
 * (rename over it), by an empty regular file, and a log writer then copies
 * Docker's log into it from its first retained entry and follows it: every
 * line kubelet could read through the symlink is in the new file, once. The
 * writer's own checkpoint makes a restart resume it exactly, and a log path
 * that is no longer a symlink is never taken over twice.
 */
import { lstat, open, rename, rm } from "node:fs/promises";
import { dirname, join, basename } from "node:path";
import { randomBytes } from "node:crypto";
import type { ContainerInspect } from "../../docker/types.ts";
import { describeCause } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { LogFollowers } from "../../logs/followers.ts";
import { LOG_PATH_LABEL } from "../labels.ts";

/** Replaces the symlink at `path` with an empty file; false when `path` is not a symlink. */
export async function replaceSymlinkWithFile(path: string): Promise<boolean> {
  let isLink: boolean;
  try {
    isLink = (await lstat(path)).isSymbolicLink();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  if (!isLink) return false;
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(4).toString("hex")}.cridock`);
  const handle = await open(temp, "wx", 0o640);
  await handle.close();
  try {
    await rename(temp, path); // replaces the link itself, never its target
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return true;
}

export async function takeOverContainerLogs(logs: LogFollowers, containers: ContainerInspect[], log: Logger): Promise<void> {
  for (const c of containers) {
    const path = c.Config.Labels?.[LOG_PATH_LABEL] ?? "";
    if (!path.startsWith("/") || logs.isFollowing(c.Id)) continue;
    try {
      if (!(await replaceSymlinkWithFile(path))) continue;
      await logs.start(c.Id, path, c.Config.Tty ?? false, c.HostConfig.LogConfig?.Type ?? "json-file");
      log.info({ containerId: c.Id, logPath: path }, "took the container's CRI log over from cri-dockerd's symlink");
    } catch (err) {
      log.error({ containerId: c.Id, logPath: path, err: describeCause(err) }, "could not take the container's CRI log over");
    }
  }
}
