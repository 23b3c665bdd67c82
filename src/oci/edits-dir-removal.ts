/**
 * What `cridock oci-layer uninstall` removes of the edits directory: only
 * what cridock put there (edits-store.ts: `<64 hex>.json`, and the
 * temporary files of their atomic writes, replace-file.ts), then the
 * directory itself if that left it empty. Never a recursive removal: the
 * directory is a flag's value, and `--edits-dir /etc` by mistake must cost
 * nothing. A directory that is a symlink is refused, not followed.
 */
import { lstat, readdir, rmdir, unlink } from "node:fs/promises";
import { join } from "node:path";

/** An edits file, or the temporary file of one's write. */
const CRIDOCK_FILE = /^[0-9a-f]{64}\.json(\.cridock-\d+(-[0-9a-f]{8})?\.tmp)?$/;

/** Removes cridock's files and the emptied directory; returns what was left and why, or "" when all went. */
export async function removeEditsDir(dir: string): Promise<string> {
  let info;
  try {
    info = await lstat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw err;
  }
  if (info.isSymbolicLink()) throw new Error(`the edits directory ${dir} is a symbolic link: not followed, nothing removed`);
  if (!info.isDirectory()) throw new Error(`the edits directory ${dir} is not a directory: nothing removed`);
  const others: string[] = [];
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const entry = await lstat(path).catch(() => undefined);
    if (!entry) continue;
    if (!CRIDOCK_FILE.test(name) || !entry.isFile()) {
      others.push(name);
      continue;
    }
    await unlink(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  }
  if (others.length > 0) {
    return `${dir} kept: it holds ${others.length} file(s) cridock did not make (${others.slice(0, 5).join(", ")})`;
  }
  try {
    await rmdir(dir);
  } catch (err) {
    // A start of another cridock wrote an edit meanwhile: its file is its own.
    if ((err as NodeJS.ErrnoException).code === "ENOTEMPTY" || (err as NodeJS.ErrnoException).code === "EEXIST") return `${dir} kept: it is not empty`;
    throw err;
  }
  return "";
}
