/**
 * The hand-over between cridock and its runtime layer: a container's spec
 * edits, as <edits dir>/<container id>.json, written by StartContainer just
 * before Docker's start (which is when containerd calls the runtime's
 * `create`) and removed once the start has returned. The directory and its
 * files are root's alone (0700, 0600): whoever can write an edit can change
 * a container's cgroup, so `cridock oci-edit` refuses files anyone else
 * owns or can write (readEdits).
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { checkLayerDir } from "./layer-dirs.ts";
import { replaceFile } from "./replace-file.ts";
import { parseSpecEdits, type SpecEdits } from "./spec-edits.ts";

const CONTAINER_ID = /^[0-9a-f]{64}$/;

function editsPath(dir: string, id: string): string {
  if (!CONTAINER_ID.test(id)) throw new Error(`"${id.slice(0, 80)}" is not a full Docker container id`);
  return join(dir, `${id}.json`);
}

export class SpecEditsStore {
  constructor(readonly dir: string) {}

  /** Records the edits for container `id`'s next runtime create (atomically: the layer never reads half a file). */
  async write(id: string, edits: SpecEdits): Promise<void> {
    const path = editsPath(this.dir, id);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await replaceFile(path, JSON.stringify(edits), 0o600);
  }

  async remove(id: string): Promise<void> {
    await rm(editsPath(this.dir, id), { force: true });
  }

  /** Around Docker's start of container `id`: its edits exist while the runtime creates it, and go after. */
  async around<T>(id: string, edits: SpecEdits, start: () => Promise<T>, onRemoveError: (err: unknown) => void): Promise<T> {
    await this.write(id, edits);
    try {
      return await start();
    } finally {
      await this.remove(id).catch(onRemoveError);
    }
  }

  /**
   * Removes what a start that never returned left (cridock stopped in the
   * middle of it): files older than `ageMs`. Younger ones may belong to a
   * start under way, of this cridock or of another one on the same dockerd.
   */
  async sweep(ageMs: number, now = Date.now()): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const removed: string[] = [];
    for (const name of names) {
      const info = await lstat(join(this.dir, name)).catch(() => undefined);
      if (!info || now - info.mtimeMs < ageMs) continue;
      await rm(join(this.dir, name), { force: true, recursive: info.isDirectory() });
      removed.push(name);
    }
    return removed;
  }
}

/** Owned by root (or by this process's user) and writable by nobody else. */
async function checkOwnership(path: string, what: string): Promise<void> {
  const s = await lstat(path);
  const me = process.getuid?.() ?? 0;
  if (s.isSymbolicLink()) throw new Error(`${what} ${path} is a symbolic link`);
  if (!s.isFile()) throw new Error(`${what} ${path} is not a regular file`);
  if (s.uid !== 0 && s.uid !== me) throw new Error(`${what} ${path} is owned by uid ${s.uid}, not root`);
  if ((s.mode & 0o022) !== 0) throw new Error(`${what} ${path} is writable by group or others (mode ${(s.mode & 0o777).toString(8)})`);
}

/** The largest edits file read: a full one (every unified key, 1024 volumes of 4096 characters) is far smaller. */
export const EDITS_MAX = 8 * 1024 * 1024;

/**
 * The layer's side: the edits at `path`, after checking the file, its
 * directory and every directory above it are root's alone and no link
 * (layer-dirs.ts). The file is opened without following a link, and its
 * size is that of the file opened, not of the name checked.
 */
export async function readEdits(path: string): Promise<SpecEdits> {
  await checkLayerDir(dirname(path), "the edits directory");
  await checkOwnership(path, "the edits file");
  const file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const info = await file.stat();
    if (!info.isFile()) throw new Error(`the edits file ${path} is not a regular file`);
    const size = info.size;
    if (size > EDITS_MAX) throw new Error(`the edits file ${path} is ${size} bytes, more than any edit needs`);
    return parseSpecEdits(await file.readFile("utf8"));
  } finally {
    await file.close();
  }
}
