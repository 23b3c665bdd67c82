/**
 * The checks the runtime layer makes of the directories it works in (the
 * rootfs directory, the edits directory) before it creates, mounts on or
 * reads anything there. It runs as host root on paths an operator names, so
 * every path is taken as hostile: a symbolic link anywhere on the way could
 * send a mkdir, chmod, chown or mount to a place of someone else's choosing,
 * and a directory another user can write lets them swap what lies in it.
 *
 * - Every ancestor: a real directory (lstat, never followed), owned by root,
 *   and writable by no one else unless sticky (/tmp: others may add names
 *   but never rename or remove root's).
 * - The directory itself: a real directory owned by root, writable by no
 *   one else; created, when absent, by a mkdir that never follows a link,
 *   and given its mode through a descriptor opened with O_NOFOLLOW.
 *
 * Owned by root means uid 0, or this process's own uid, which is root
 * wherever the layer runs for Docker (the unit tests may run as another).
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, type FileHandle } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import process from "node:process";

const me = () => process.getuid?.() ?? 0;

function ownedByRoot(uid: number): boolean {
  return uid === 0 || uid === me();
}

function mode(n: number): string {
  return (n & 0o7777).toString(8).padStart(4, "0");
}

/** Why `path`'s ancestors (not `path` itself) cannot be trusted, or undefined. */
async function ancestorsProblem(path: string): Promise<string | undefined> {
  for (let d = dirname(path); ; d = dirname(d)) {
    const s = await lstat(d).catch((err: NodeJS.ErrnoException) => err);
    if (s instanceof Error) return `${d} cannot be examined: ${s.message}`;
    if (s.isSymbolicLink()) return `${d} is a symbolic link: name the real directory`;
    if (!s.isDirectory()) return `${d} is not a directory`;
    if (!ownedByRoot(s.uid)) return `${d} is owned by uid ${s.uid}, not root`;
    if ((s.mode & 0o022) !== 0 && (s.mode & 0o1000) === 0) return `${d} is writable by group or others (mode ${mode(s.mode)}) and not sticky`;
    if (d === "/") return undefined;
  }
}

/** Why `path` is not a directory the layer may use, or undefined (read only: the edits directory's check). */
export async function layerDirProblem(path: string, what: string): Promise<string | undefined> {
  if (!path.startsWith("/") || resolve(path) !== path.replace(/\/+$/, "")) return `${what} ${path} is not an absolute path without . or .. parts`;
  const above = await ancestorsProblem(path);
  if (above) return `${what} ${path}: ${above}`;
  const s = await lstat(path).catch((err: NodeJS.ErrnoException) => err);
  if (s instanceof Error) return `${what} ${path} cannot be examined: ${s.message}`;
  if (s.isSymbolicLink()) return `${what} ${path} is a symbolic link`;
  if (!s.isDirectory()) return `${what} ${path} is not a directory`;
  if (!ownedByRoot(s.uid)) return `${what} ${path} is owned by uid ${s.uid}, not root`;
  if ((s.mode & 0o022) !== 0) return `${what} ${path} is writable by group or others (mode ${mode(s.mode)})`;
  return undefined;
}

export async function checkLayerDir(path: string, what: string): Promise<void> {
  const problem = await layerDirProblem(path, what);
  if (problem) throw new Error(problem);
}

/**
 * The rootfs directory, made if absent and checked: root's, mode `wanted`
 * (0711: the pods' roots pass through it, nobody lists it). An existing
 * directory with another mode that is not writable by others (an older
 * layer's, an operator's 0755) is given `wanted` through a descriptor; one
 * anyone else could write, or a link, is refused: the operator must look.
 */
export async function ensureLayerDir(path: string, what: string, wanted: number): Promise<void> {
  if (!path.startsWith("/")) throw new Error(`${what} ${path} is not an absolute path`);
  const above = await ancestorsProblem(path);
  if (above) throw new Error(`${what} ${path}: ${above}`);
  // mkdir never follows a link at its last component: an existing link is EEXIST, then refused below.
  await mkdir(path, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "EEXIST") throw err;
  });
  await checkLayerDir(path, what);
  await withDirectory(path, async (dir) => {
    await dir.chmod(wanted);
  });
}

/**
 * `fn` on a descriptor of directory `path`, opened without following a
 * link (O_NOFOLLOW) and checked to be a directory (O_DIRECTORY): a chmod or
 * chown through it changes that directory and no other.
 */
export async function withDirectory<T>(path: string, fn: (dir: FileHandle) => Promise<T>): Promise<T> {
  const dir = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
    // Linux answers ELOOP, or ENOTDIR when O_DIRECTORY meets the link first.
    const why = err.code === "ELOOP" || err.code === "ENOTDIR" ? "a symbolic link, or not a directory" : err.message;
    throw new Error(`${path} is not a directory the layer may use (${why})`);
  });
  try {
    return await fn(dir);
  } finally {
    await dir.close();
  }
}
