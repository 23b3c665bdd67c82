/**
 * Deleting paths from a created (not running) container's root filesystem
 * on Docker's overlay2 driver, for a checkpoint's deleted.files. Docker's
 * API can add files to a container (PUT /containers/{id}/archive) but has
 * no way to delete one, so the deletion is made the way overlayfs records
 * it: a whiteout (a character device 0:0) of the same name in the
 * container's upper directory, which hides the lower layers' file once
 * Docker mounts the filesystem at start.
 *
 * A whiteout needs its parent directory in the upper directory; a missing
 * one is created with the mode and owner of the first lower layer's
 * directory of that name, as overlayfs's own copy-up would. A path whose
 * parent is not a plain directory in any layer (a symlink, a file, absent)
 * names nothing that could be deleted, and is skipped. Opaque directories
 * (an xattr Node cannot read) are not looked at: at worst a whiteout hides a
 * file that an opaque directory already hid.
 */
import { execFile } from "node:child_process";
import { chown, lstat, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Stats } from "node:fs";

const run = promisify(execFile);

export interface OverlayDirectories {
  upper: string;
  /** Top first, as Docker's LowerDir lists them. */
  lowers: readonly string[];
}

/** overlay2's directories of a container, from its inspect's GraphDriver; undefined for any other driver. */
export function overlayDirectories(graphDriver: { Name: string; Data?: Record<string, string> | null } | undefined): OverlayDirectories | undefined {
  const data = graphDriver?.Data;
  if (graphDriver?.Name !== "overlay2" || !data?.UpperDir) return undefined;
  return { upper: data.UpperDir, lowers: (data.LowerDir ?? "").split(":").filter(Boolean) };
}

/** Whiteouts for `paths` (clean absolute paths, checked by the caller). Returns how many were made. */
export async function whiteOut(dirs: OverlayDirectories, paths: readonly string[]): Promise<number> {
  let made = 0;
  for (const path of paths) {
    const parts = path.slice(1).split("/");
    const name = parts.pop()!;
    const relative = [...parts, name].join("/");
    const upper = join(dirs.upper, relative);
    if (!(await inLowers(dirs, relative))) {
      // Only the container's own copy (if any) to remove: no whiteout, no parent made.
      if (await upperParentsAreDirectories(dirs, parts)) await rm(upper, { recursive: true, force: true });
      continue;
    }
    if (!(await ensureUpperParents(dirs, parts))) continue;
    await rm(upper, { recursive: true, force: true });
    await run("mknod", [upper, "c", "0", "0"]);
    made++;
  }
  return made;
}

/** Whether each parent exists in the upper directory as a directory (not a symlink out of it). */
async function upperParentsAreDirectories(dirs: OverlayDirectories, parts: readonly string[]): Promise<boolean> {
  let path = dirs.upper;
  for (const part of parts) {
    path = join(path, part);
    if (!(await lstatOrUndefined(path))?.isDirectory()) return false;
  }
  return true;
}

/** The parent directories of a path in the upper directory, made where missing; false when one is not a directory. */
async function ensureUpperParents(dirs: OverlayDirectories, parts: readonly string[]): Promise<boolean> {
  let relative = "";
  for (const part of parts) {
    relative = relative ? `${relative}/${part}` : part;
    const upper = join(dirs.upper, relative);
    const existing = await lstatOrUndefined(upper);
    if (existing) {
      if (!existing.isDirectory()) return false;
      continue;
    }
    const lower = await inLowers(dirs, relative);
    if (!lower?.isDirectory()) return false;
    await mkdir(upper, { mode: lower.mode & 0o7777 });
    await chown(upper, lower.uid, lower.gid);
  }
  return true;
}

/** The first lower layer's entry of that name, unless a whiteout there hides it; undefined when none has it. */
async function inLowers(dirs: OverlayDirectories, relative: string): Promise<Stats | undefined> {
  for (const lower of dirs.lowers) {
    const found = await lowerEntry(lower, relative);
    if (!found) continue;
    if (found.isCharacterDevice() && found.rdev === 0) return undefined;
    return found;
  }
  return undefined;
}

/**
 * lstat of `relative` in one layer, walked a component at a time: a layer
 * whose parent component is no directory (a symlink, which lstat of the
 * whole path would follow out of the layer) has no such entry.
 */
async function lowerEntry(lower: string, relative: string): Promise<Stats | undefined> {
  const parts = relative.split("/");
  let path = lower;
  for (const [i, part] of parts.entries()) {
    path = join(path, part);
    const found = await lstatOrUndefined(path);
    if (!found || i === parts.length - 1) return found;
    if (!found.isDirectory()) return undefined;
  }
  return undefined;
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw err;
  }
}
