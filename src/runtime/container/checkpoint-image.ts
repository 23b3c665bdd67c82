/**
 * Checkpoint images: how Kubernetes restores a checkpointed container.
 * kubelet refuses an image name that is a path, so it cannot hand
 * CreateContainer an archive; instead an OCI image is built from the archive
 * (`checkpointctl build`, or buildah: FROM scratch, one layer holding the
 * archive's members: checkpoint/, config.dump, spec.dump, rootfs-diff.tar,
 * deleted.files), pushed, and named in a pod like any image. kubelet pulls
 * it and passes its id to CreateContainer, and the runtime restores.
 *
 * CRI-O and containerd recognise such an image by its manifest annotations
 * (io.kubernetes.cri-o.annotations.checkpoint.name). Docker's classic image
 * store keeps no manifest annotations, so cridock recognises one by what it
 * is: an image with nothing to run (no Entrypoint, no Cmd) whose root holds
 * checkpoint/inventory.img, the file every CRIU dump starts with. Only
 * images with nothing to run are looked into, once per image id (through a
 * scratch container that image-files.ts caches the answer of).
 *
 * To restore, the members are copied out of the image into a temporary
 * archive in cridock's checkpoint work directory, which the restore from an
 * archive (checkpoint-restore.ts) reads, checks and stages exactly as a path
 * given to CreateContainer; the copy is removed once the container is staged
 * or its creation failed.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ImageFileReader, ImageTreeReader } from "../image-files.ts";
import { ARCHIVE, addEntry, writeTarAtomically } from "./checkpoint-archive.ts";

/** The file whose presence at an image's root makes it a checkpoint image. */
export const CHECKPOINT_IMAGE_MARKER = `/${ARCHIVE.checkpointDirectory}/inventory.img`;

/** The archive's members, as paths of the image's filesystem. */
const MEMBERS = [ARCHIVE.checkpointDirectory, ARCHIVE.configDump, ARCHIVE.specDump, ARCHIVE.rootfsDiffTar, ARCHIVE.deletedFiles].map((m) => `/${m}`);

/** What of an image's config tells whether it could be a checkpoint image. */
export interface RunnableConfig {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
}

/**
 * A checkpoint image has nothing to run: built from scratch with files only.
 * Every other image is not looked into, so ordinary creates pay nothing.
 */
export function mayBeCheckpointImage(config: RunnableConfig | null | undefined): boolean {
  return !config?.Entrypoint?.length && !config?.Cmd?.length;
}

export class CheckpointImages {
  constructor(
    private readonly files: Pick<ImageFileReader, "exists"> & ImageTreeReader,
    /** Where the temporary archives go: the checkpoint work directory, whose stale leftovers checkpoint.ts removes. */
    private readonly workRoot: string,
  ) {}

  /** Whether the image (its id and config) is a checkpoint image. */
  async holdsCheckpoint(imageId: string, config: RunnableConfig | null | undefined): Promise<boolean> {
    return mayBeCheckpointImage(config) && (await this.files.exists(imageId, CHECKPOINT_IMAGE_MARKER));
  }

  /**
   * The image's checkpoint as an archive file of its own (in the layout
   * checkpoint-archive-read.ts reads); the caller removes it with
   * `release`. Entries are copied as the image holds them: the archive's
   * reader checks every one.
   */
  async copyToArchive(imageId: string, signal?: AbortSignal): Promise<{ path: string; release: () => Promise<void> }> {
    await mkdir(this.workRoot, { recursive: true, mode: 0o700 });
    const path = join(this.workRoot, `image-${imageId.replace(/^sha256:/, "").slice(0, 12)}-${randomBytes(6).toString("hex")}.tar`);
    const { extract } = await import("tar-stream");
    await writeTarAtomically(
      path,
      (pack) =>
        this.files.archives(
          imageId,
          MEMBERS,
          async (tar) => {
            const reader = extract();
            tar.once("error", (err) => reader.destroy(err));
            tar.pipe(reader);
            for await (const entry of reader) {
              signal?.throwIfAborted();
              // Docker names them relative to the image's root ("checkpoint/inventory.img"), as the archive does.
              const header = entry.header;
              if (header.type === "file" || header.type === "contiguous-file") {
                await addEntry(pack, header, entry as AsyncIterable<Uint8Array>);
              } else {
                entry.resume();
                await addEntry(pack, { ...header, size: 0 });
              }
            }
          },
          signal,
        ),
      signal,
    );
    return { path, release: () => rm(path, { force: true }) };
  }
}
