/**
 * The checkpoint archive CheckpointContainer leaves at kubelet's location,
 * laid out as CRI-O writes it and checkpointctl reads it
 * (github.com/checkpoint-restore/checkpointctl lib/metadata.go):
 *   config.dump       checkpointctl's ContainerConfig (JSON)
 *   spec.dump         the container's OCI runtime spec (JSON)
 *   checkpoint/       CRIU's images
 *   rootfs-diff.tar   files added or changed in the root filesystem (only when there are any)
 *   deleted.files     JSON list of the paths deleted from it (only when there are any)
 *
 * The archive is written beside its final name (`<location>.tmp-<random>`),
 * fsynced and renamed, so kubelet (or an operator copying the file away)
 * never sees a torn archive: on any failure the temporary file is removed
 * and nothing is at the location.
 */
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, readdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { once, type EventEmitter } from "node:events";
// tar-stream is loaded when the first checkpoint is written (startup loads no tar code: test/unit/startup-modules.test.ts).
import type { Header, Pack } from "tar-stream";

/** checkpointctl's names for the archive's members (lib/metadata.go). */
export const ARCHIVE = {
  configDump: "config.dump",
  specDump: "spec.dump",
  checkpointDirectory: "checkpoint",
  rootfsDiffTar: "rootfs-diff.tar",
  deletedFiles: "deleted.files",
} as const;

export interface CheckpointArchiveParts {
  /** The directory CRIU's images are in (as Docker wrote them): they go under checkpoint/. */
  imagesDirectory: string;
  configDump: object;
  specDump: object;
  /** rootfs-diff.tar, already written; undefined when nothing was added or changed. */
  rootfsDiffTar?: string;
  /** Absolute paths deleted from the root filesystem. */
  deletedFiles: readonly string[];
}

/** The archive's entries are readable by root alone: they hold every memory page of the container's processes. */
const FILE_MODE = 0o600;
const DIRECTORY_MODE = 0o700;

/** Writes the checkpoint archive at `location` atomically (see above). */
export async function writeCheckpointArchive(location: string, parts: CheckpointArchiveParts, signal?: AbortSignal): Promise<void> {
  await writeTarAtomically(location, (pack) => packCheckpoint(pack, parts, signal), signal);
}

async function packCheckpoint(pack: Pack, parts: CheckpointArchiveParts, signal?: AbortSignal): Promise<void> {
  const now = new Date();
  await addEntry(pack, { name: ARCHIVE.configDump, mode: FILE_MODE, mtime: now }, json(parts.configDump));
  await addEntry(pack, { name: ARCHIVE.specDump, mode: FILE_MODE, mtime: now }, json(parts.specDump));
  await addDirectory(pack, parts.imagesDirectory, ARCHIVE.checkpointDirectory, signal);
  if (parts.rootfsDiffTar) await addFile(pack, parts.rootfsDiffTar, ARCHIVE.rootfsDiffTar);
  if (parts.deletedFiles.length > 0) {
    await addEntry(pack, { name: ARCHIVE.deletedFiles, mode: FILE_MODE, mtime: now }, json(parts.deletedFiles));
  }
}

/** Go's json.MarshalIndent(v, "", "  "), as CRI-O writes these files. */
function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value, null, 2));
}

/**
 * Writes a tar archive at `path`, filled by `fill`, through a temporary file
 * in the same directory (the rename must not cross file systems): created
 * exclusively, fsynced, renamed over `path`, the directory fsynced. Removes
 * the temporary file when anything fails or the signal aborts.
 */
export async function writeTarAtomically(path: string, fill: (pack: Pack) => Promise<void>, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  const temp = `${path}.tmp-${randomBytes(6).toString("hex")}`;
  const { pack: tarPack } = await import("tar-stream");
  const handle = await open(temp, "wx", FILE_MODE);
  let closed = false;
  const pack = tarPack();
  const abort = () => pack.destroy(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
  signal?.addEventListener("abort", abort, { once: true });
  try {
    const filled = fill(pack).then(
      () => pack.finalize(),
      (err: unknown) => {
        pack.destroy(err instanceof Error ? err : new Error(String(err)));
        throw err;
      },
    );
    // A failed write ends the copy first; the fill's own failure is then of no interest.
    filled.catch(() => undefined);
    // tar-stream's pack is a streamx stream, whose end Node's pipeline() does not see: copied by hand.
    const written = (async () => {
      for await (const chunk of pack) await handle.write(chunk as Uint8Array);
    })();
    written.catch((err: unknown) => pack.destroy(err instanceof Error ? err : new Error(String(err))));
    await Promise.all([filled, written]);
    signal?.throwIfAborted();
    await handle.sync();
    await handle.close();
    closed = true;
    signal?.throwIfAborted();
    await rename(temp, path);
  } catch (err) {
    if (!closed) await handle.close().catch(() => undefined);
    await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    signal?.removeEventListener("abort", abort);
  }
  await syncDirectory(dirname(path));
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export type EntryHeader = Partial<Header> & Pick<Header, "name">;

/**
 * One entry: `content` is a Buffer, a stream of exactly header.size bytes
 * (a file's, or an entry of another tar), or nothing (directories, links).
 */
export function addEntry(pack: Pack, header: EntryHeader, content?: Buffer | AsyncIterable<Uint8Array>): Promise<void> {
  if (content === undefined || Buffer.isBuffer(content)) {
    const body = content ?? Buffer.alloc(0);
    return new Promise((resolve, reject) => {
      pack.entry({ ...header, size: body.length }, body, (err) => (err ? reject(err) : resolve()));
    });
  }
  // tar-stream's streams are streamx streams, whose end Node's pipeline() does not see: copied by hand.
  return new Promise((resolve, reject) => {
    const sink = pack.entry(header, (err) => (err ? reject(err) : resolve()));
    const copy = async () => {
      for await (const chunk of content) {
        if (!sink.write(chunk)) await once(sink as unknown as EventEmitter, "drain");
      }
      sink.end(null); // streamx: null ends without writing
    };
    copy().catch((err: unknown) => {
      sink.destroy(err instanceof Error ? err : new Error(String(err)));
      reject(err);
    });
  });
}

async function addFile(pack: Pack, source: string, name: string): Promise<void> {
  const info = await stat(source);
  await addEntry(pack, { name, size: info.size, mode: FILE_MODE, mtime: info.mtime }, createReadStream(source));
}

/** `source`'s tree under `name/`: directories and regular files (CRIU writes nothing else). */
async function addDirectory(pack: Pack, source: string, name: string, signal?: AbortSignal): Promise<void> {
  const info = await stat(source);
  await addEntry(pack, { name: `${name}/`, type: "directory", mode: DIRECTORY_MODE, mtime: info.mtime });
  const children = (await readdir(source, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const child of children) {
    signal?.throwIfAborted();
    const path = join(source, child.name);
    if (child.isDirectory()) await addDirectory(pack, path, `${name}/${child.name}`, signal);
    else if (child.isFile()) await addFile(pack, path, `${name}/${child.name}`);
  }
}
