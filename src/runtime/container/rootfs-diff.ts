/**
 * The root filesystem changes of a checkpointed container, as CRI-O puts
 * them in its archive (go.podman.io/common crutils.CRCreateRootFsDiffTar):
 * added and modified files in rootfs-diff.tar, with paths relative to the
 * root ("etc/motd"), and the deleted paths apart (deleted.files). Docker's
 * `GET /containers/{id}/changes` says which paths; their content comes from
 * the container through Docker's archive endpoint, which reads the rootfs
 * whatever the storage driver (overlay2's upper directory or a containerd
 * snapshot), so nothing here depends on dockerd's storage layout.
 */
import { posix } from "node:path";
import type { Readable } from "node:stream";
import type { Pack } from "tar-stream";
import type { DockerClient } from "../../docker/client.ts";
import { DockerError } from "../../docker/errors.ts";
import type { ContainerChange } from "../../docker/types.ts";
import { withContext } from "../../errors.ts";
import { addEntry } from "./checkpoint-archive.ts";

/**
 * Mount points of every container, whose content is not the container's own
 * (the list CRI-O copied from Podman's diff, libpod/diff.go).
 */
const CONTAINER_MOUNTS = new Set(["/dev", "/dev/shm", "/proc", "/run", "/run/.containerenv", "/run/secrets", "/sys"]);

export interface RootfsDiffPlan {
  /** Paths to copy from the container: added ones whole (with what is below them), modified ones if they are not directories. */
  copy: { path: string; added: boolean }[];
  /** Absolute paths deleted from the image's filesystem. */
  deleted: string[];
}

/**
 * What goes in the archive for these changes. Left out: the mount points
 * every container has, the container's mounts (volumes, kubelet's files:
 * their content lives outside the rootfs) and what is below them, paths
 * under an added directory (copied with it), and any path that is not a
 * clean absolute path (Docker gives none; they would escape the archive's root).
 */
export function planRootfsDiff(changes: readonly ContainerChange[], mountDestinations: readonly string[]): RootfsDiffPlan {
  const mounts = mountDestinations.map((m) => posix.normalize(m));
  const skipped = (path: string) => CONTAINER_MOUNTS.has(path) || mounts.some((m) => path === m || path.startsWith(m === "/" ? "/" : `${m}/`));
  const usable = changes.filter((c) => isCleanAbsolute(c.Path) && !skipped(c.Path));
  const added = new Set(usable.filter((c) => c.Kind === 1).map((c) => c.Path));
  const underAdded = (path: string) => {
    for (let dir = posix.dirname(path); dir !== "/"; dir = posix.dirname(dir)) if (added.has(dir)) return true;
    return false;
  };
  const plan: RootfsDiffPlan = { copy: [], deleted: [] };
  for (const change of [...usable].sort((a, b) => (a.Path < b.Path ? -1 : a.Path > b.Path ? 1 : 0))) {
    if (change.Kind === 2) plan.deleted.push(change.Path);
    else if (!underAdded(change.Path)) plan.copy.push({ path: change.Path, added: change.Kind === 1 });
  }
  return plan;
}

function isCleanAbsolute(path: string): boolean {
  return path.startsWith("/") && path !== "/" && !path.includes("\0") && posix.normalize(path) === path && !path.endsWith("/");
}

/** The container's files, as the archive needs them (DockerClient's archive endpoints). */
export interface ContainerFiles {
  /** Whether the path is a directory; undefined when it is gone. */
  isDirectory(path: string): Promise<boolean | undefined>;
  /** A tar of the path (its last component as the top entry, directories with their contents); undefined when it is gone. */
  archive(path: string): Promise<Readable | undefined>;
}

/** ContainerFiles of a container, through Docker's archive endpoint (HEAD for a stat, GET for a tar). */
export function dockerContainerFiles(docker: DockerClient, id: string, signal?: AbortSignal): ContainerFiles {
  return {
    isDirectory: async (path) => {
      const found = await docker.containerPathStat(id, path, signal);
      // Go's os.ModeDir is the top bit of the 32-bit mode.
      return found === undefined ? undefined : (found.mode & 0x80000000) !== 0;
    },
    archive: async (path) => {
      try {
        return (await docker.containerArchive(id, path, signal)).body as unknown as Readable;
      } catch (err) {
        if (err instanceof DockerError && err.statusCode === 404) return undefined;
        throw withContext(`reading ${path} of container ${id.slice(0, 12)}`, err, "UNKNOWN");
      }
    },
  };
}

/**
 * Packs the planned paths into `pack` with names relative to the root.
 * Modified directories are left out, as CRI-O leaves them out: what changed
 * in them is listed on its own. Returns how many paths were copied.
 */
export async function packRootfsDiff(pack: Pack, files: ContainerFiles, plan: RootfsDiffPlan, signal?: AbortSignal): Promise<number> {
  let copied = 0;
  for (const { path, added } of plan.copy) {
    signal?.throwIfAborted();
    if (!added && (await files.isDirectory(path)) !== false) continue;
    const tar = await files.archive(path);
    if (!tar) continue; // gone since Docker listed it
    await repack(tar, pack, path);
    copied++;
  }
  return copied;
}

/**
 * Docker names the entries of an archive of /a/b "b", "b/c", …: they are
 * renamed to "a/b", "a/b/c" (hard link targets too). An entry outside that
 * tree would be Docker's bug or a hostile daemon's; it fails the checkpoint.
 */
async function repack(tar: Readable, pack: Pack, path: string): Promise<void> {
  const parent = posix.dirname(path).slice(1);
  const top = posix.basename(path);
  const rename = (name: string) => {
    const clean = posix.normalize(name.replace(/\/+$/, ""));
    if (clean !== top && !clean.startsWith(`${top}/`)) throw new Error(`Docker's archive of ${path} holds ${JSON.stringify(name)}, outside ${top}`);
    return parent ? `${parent}/${clean}` : clean;
  };
  const { extract } = await import("tar-stream");
  const reader = extract();
  tar.pipe(reader);
  tar.once("error", (err) => reader.destroy(err));
  try {
    for await (const entry of reader) {
      const header = { ...entry.header, name: rename(entry.header.name) };
      if (header.type === "directory") header.name += "/";
      if (header.type === "link" && header.linkname) header.linkname = rename(header.linkname);
      if (header.type === "file" || header.type === "contiguous-file") await addEntry(pack, header, entry as AsyncIterable<Uint8Array>);
      else {
        entry.resume();
        await addEntry(pack, header);
      }
    }
  } finally {
    reader.destroy();
    tar.destroy();
  }
}
