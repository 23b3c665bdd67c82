/**
 * daemon.json changed as an operator would change it by hand: the file
 * keeps its mode and owner (it may hold proxy credentials and be 0600), a
 * symlinked daemon.json stays a symlink (its target is rewritten, beside
 * the target, so that the rename stays on one filesystem and the link is
 * not replaced by a plain file), the write is atomic and fsynced, and
 * cridock's own concurrent runs (install, uninstall, the server's
 * re-registration) take turns through a lock file beside the target
 * (file-lock.ts). What changes in the text is daemon-config.ts's business.
 */
import { lstat, mkdir, readFile, readlink, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { withFileLock, type LockOptions } from "./file-lock.ts";
import { replaceFile } from "./replace-file.ts";

/** More links than this in a row is a loop (the kernel's own limit is 40). */
const MAX_LINKS = 40;

/** The file a write of `path` must replace: `path` itself, or the end of its chain of symlinks (which may not exist yet). */
export async function resolveWriteTarget(path: string): Promise<string> {
  let current = resolve(path);
  for (let i = 0; i <= MAX_LINKS; i++) {
    let info;
    try {
      info = await lstat(current);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return current;
      throw err;
    }
    if (!info.isSymbolicLink()) {
      if (!info.isFile()) throw new Error(`${current} is not a regular file`);
      return current;
    }
    current = resolve(dirname(current), await readlink(current));
  }
  throw new Error(`${path} is a chain of more than ${MAX_LINKS} symbolic links`);
}

/** The lock of writes to `target` (a resolved path): beside it, so that every run that writes the same file finds the same lock. */
export function lockPathFor(target: string): string {
  return `${target}.cridock-lock`;
}

export interface DaemonJsonChange {
  /** The file written (the symlink's target where daemon.json is one); undefined when nothing changed. */
  written?: string;
}

/**
 * Reads daemon.json (undefined where it does not exist), hands its text to
 * `change`, and writes what that returns (nothing when it returns
 * undefined), all under the lock. `change` throws to refuse: the file is
 * then left exactly as it was. `createDirectory` makes the file's directory
 * first (an install on a node where dockerd never had a daemon.json);
 * without it, a missing directory is a file that does not exist. It runs under the lock, so what it checks
 * (the server's re-registration checks that install's record still
 * exists) holds for the write. A new file is root's, 0644, as dockerd's
 * packages make it.
 */
export async function changeDaemonJson(
  path: string,
  change: (text: string | undefined) => string | undefined | Promise<string | undefined>,
  options: LockOptions & { createDirectory?: boolean } = {},
): Promise<DaemonJsonChange> {
  const target = await resolveWriteTarget(path);
  const dir = dirname(target);
  if (options.createDirectory) {
    await mkdir(dir, { recursive: true, mode: 0o755 });
  } else if (!(await stat(dir).then((s) => s.isDirectory(), () => false))) {
    // No directory, so no file and nowhere for a lock: a change that writes nothing (an uninstall) is done, and leaves no directory behind.
    if ((await change(undefined)) !== undefined) throw new Error(`${dir}, the directory of ${path}, does not exist`);
    return {};
  }
  const lock: LockOptions = { timeoutMs: options.timeoutMs, pollMs: options.pollMs };
  return withFileLock(
    lockPathFor(target),
    async () => {
      let text: string | undefined;
      let kept: { mode: number; uid: number; gid: number } | undefined;
      try {
        const info = await stat(target);
        kept = { mode: info.mode & 0o7777, uid: info.uid, gid: info.gid };
        text = await readFile(target, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
      const updated = await change(text);
      if (updated === undefined) return {};
      await replaceFile(target, updated, kept?.mode ?? 0o644, { durable: true, owner: kept ? { uid: kept.uid, gid: kept.gid } : undefined });
      return { written: target };
    },
    lock,
  );
}
