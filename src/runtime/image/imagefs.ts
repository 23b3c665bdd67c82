/**
 * The filesystem holding Docker's images (ImageFsInfo): statfs of the Docker
 * root directory. Writable-layer usage (container filesystems) is added by the
 * stats collector once it has measured it.
 */
import { statfs } from "node:fs/promises";
import type { DockerClient } from "../../docker/client.ts";

export interface FilesystemUsage {
  /** Nanoseconds since the epoch. */
  timestamp: bigint;
  mountpoint: string;
  usedBytes: bigint;
  inodesUsed: bigint;
}

export function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

export async function filesystemUsage(path: string): Promise<FilesystemUsage> {
  const fs = await statfs(path, { bigint: true });
  return {
    timestamp: nowNanos(),
    mountpoint: path,
    usedBytes: (fs.blocks - fs.bfree) * fs.bsize,
    inodesUsed: fs.files - fs.ffree,
  };
}

export class ImageFilesystem {
  private rootDir: string | undefined;

  constructor(private readonly docker: DockerClient) {}

  async usage(): Promise<FilesystemUsage> {
    this.rootDir ??= (await this.docker.info()).DockerRootDir;
    return filesystemUsage(this.rootDir);
  }
}
