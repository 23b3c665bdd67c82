/**
 * How the layer's files are written: whole, beside their final name, then
 * renamed over it, so that a reader (runc reading config.json, the launcher
 * reading an edits file, dockerd reading daemon.json) sees the old file or
 * the new one, never half of one. The caller makes the directory.
 *
 * `durable` adds what a configuration file that must survive a power cut
 * needs (daemon.json): the data is fsynced before the rename, and the
 * directory after it, so that after a crash the name points at either the
 * old file or the complete new one. Files that live on tmpfs or for one
 * container start (edits, a bundle's config.json) skip the cost.
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import process from "node:process";

export interface ReplaceOptions {
  /** fsync the file before the rename and its directory after it. */
  durable?: boolean;
  /** The owner the new file gets (the old file's, kept); without it, this process's. */
  owner?: { uid: number; gid: number };
}

/** The temporary name a replace of `path` writes first; unique per call, even among concurrent calls of one process. */
export function tempNameFor(path: string): string {
  return `${path}.cridock-${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
}

/** Whether `name` (a base name) is a temporary file replaceFile makes. */
export const TEMP_NAME = /\.cridock-\d+(-[0-9a-f]{8})?\.tmp$/;

export async function replaceFile(path: string, text: string, mode: number, options: ReplaceOptions = {}): Promise<void> {
  const temp = tempNameFor(path);
  try {
    // "wx": a leftover of the same name is never written through (nor a symlink planted there followed).
    const file = await open(temp, "wx", 0o600);
    try {
      await file.writeFile(text);
      // The owner before the mode: chown clears set-id bits, and the mode is then exactly `mode`
      // (open's mode passes through the umask).
      if (options.owner) await file.chown(options.owner.uid, options.owner.gid);
      await file.chmod(mode);
      if (options.durable) await file.sync();
    } finally {
      await file.close();
    }
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  }
  if (options.durable) await syncDirectory(dirname(path));
}

/** fsync of a directory: makes a rename in it durable. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
