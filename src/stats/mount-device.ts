/**
 * The filesystem a directory lives on, as cAdvisor labels it: the mount
 * source of the longest mount point containing the directory (from
 * /proc/self/mountinfo), with its capacity and inodes from statfs.
 */
import { readFile, statfs } from "node:fs/promises";
import { parseMountinfo } from "../mountinfo.ts";

export interface FilesystemInfo {
  device: string;
  capacityBytes: bigint;
  inodesTotal: bigint;
  inodesFree: bigint;
}

/** The mount source of the mount point holding `dir`, from mountinfo text. */
export function mountSourceOf(mountinfo: string, dir: string): string | undefined {
  let best: { point: string; source: string } | undefined;
  for (const { mountPoint: point, source } of parseMountinfo(mountinfo)) {
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
