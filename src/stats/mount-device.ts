/**
 * The filesystem a directory lives on, as cAdvisor labels it: the mount
 * source of the longest mount point containing the directory (from
 * /proc/self/mountinfo), with its capacity and inodes from statfs.
 */
import { readFile, statfs } from "node:fs/promises";

export interface FilesystemInfo {
  device: string;
  capacityBytes: bigint;
  inodesTotal: bigint;
  inodesFree: bigint;
}

/** Undoes mountinfo's octal escapes (\040 for a space). */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The mount source of the mount point holding `dir`, from mountinfo text. */
export function mountSourceOf(mountinfo: string, dir: string): string | undefined {
  let best: { point: string; source: string } | undefined;
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const point = unescape(left.split(" ")[4] ?? "");
    const source = unescape(right.split(" ")[1] ?? "");
    const inside = point === "/" || dir === point || dir.startsWith(point.endsWith("/") ? point : point + "/");
    if (inside && (!best || point.length >= best.point.length)) best = { point, source };
  }
  return best?.source;
}

export async function filesystemOf(dir: string): Promise<FilesystemInfo> {
  const [info, mountinfo] = await Promise.all([statfs(dir, { bigint: true }), readFile("/proc/self/mountinfo", "utf8").catch(() => "")]);
  return {
    device: mountSourceOf(mountinfo, dir) ?? dir,
    capacityBytes: info.blocks * info.bsize,
    inodesTotal: info.files,
    inodesFree: info.ffree,
  };
}
