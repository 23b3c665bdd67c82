/**
 * The writable layer of a running container, read from the kernel: the
 * overlay mount at the root of its init process carries the upper
 * directory in its options. Docker's classic image store also reports that
 * directory (GraphDriver.Data.UpperDir); the containerd image store reports
 * none, and the containerd snapshot's directory has no name Docker gives
 * out, so for it this is the only way to walk the layer ourselves.
 */
import { readKernelFile } from "./kernel-file.ts";

/**
 * The upperdir option of the overlay mounted at "/" in a mountinfo text,
 * or undefined when the root is no overlay. Lines look like
 * `id parent maj:min root mountpoint opts [tags] - fstype source superopts`.
 */
export function overlayUpperDir(mountinfo: string): string | undefined {
  for (const line of mountinfo.split("\n")) {
    const [before, after] = line.split(" - ");
    if (!before || !after) continue;
    if (before.split(" ")[4] !== "/") continue;
    const [fstype, , superOptions = ""] = after.split(" ");
    if (fstype !== "overlay") return undefined;
    // Paths in mountinfo escape space, tab, newline and backslash as octal; commas in paths are escaped by overlayfs.
    const option = superOptions.split(",").find((o) => o.startsWith("upperdir="));
    return option ? unescapeOctal(option.slice("upperdir=".length)) : undefined;
  }
  return undefined;
}

function unescapeOctal(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The upper directory of the overlay at the root of process `pid`, if any. */
export async function processUpperDir(pid: number): Promise<string | undefined> {
  if (pid <= 0) return undefined;
  const text = await readKernelFile(`/proc/${pid}/mountinfo`).catch(() => "");
  return overlayUpperDir(text);
}
