/**
 * How the layer's files are written: whole, beside their final name, then
 * renamed over it, so that a reader (runc reading config.json, the launcher
 * reading an edits file, dockerd reading daemon.json) sees the old file or
 * the new one, never half of one. The caller makes the directory.
 */
import { chmod, rename, rm, writeFile } from "node:fs/promises";
import process from "node:process";

export async function replaceFile(path: string, text: string, mode: number): Promise<void> {
  const temp = `${path}.cridock-${process.pid}.tmp`;
  try {
    await writeFile(temp, text, { mode });
    // writeFile's mode passes through the umask; the file gets exactly `mode`.
    await chmod(temp, mode);
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  }
}
