/**
 * Setting aside a file of cridock's own state that cannot be read (torn by
 * a power loss, or damaged): it moves into `corrupt/` beside it, named
 * after it with the time, for a person to look at. A file that cannot be
 * read is never deleted on the reader's word alone. The sandbox
 * checkpoints (store/checkpoint.ts) and the log positions (logs/resume.ts)
 * both do this.
 */
import { mkdir, rename } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** The directory, beside the file, that setAside moves it into. */
export const SET_ASIDE_DIR = "corrupt";

/** Moves `file` into `corrupt/` beside it (made 0700: it is cridock's state); returns its new path. */
export async function setAside(file: string): Promise<string> {
  const dir = join(dirname(file), SET_ASIDE_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const aside = join(dir, `${basename(file)}.${new Date().toISOString().replace(/[:.]/g, "-")}`);
  await rename(file, aside);
  return aside;
}
