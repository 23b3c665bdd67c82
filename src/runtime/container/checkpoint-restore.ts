/**
 * Restoring a container from a checkpoint archive (CheckpointContainer's,
 * checkpoint-archive.ts, or CRI-O's, which has the same layout): a
 * CreateContainer whose image is the absolute path of an archive, as CRI-O
 * takes one (crictl create with "image": {"image": "/path/c.tar"}), or a
 * checkpoint image, the archive as an OCI image's layer, which is how kubelet
 * asks (checkpoint-image.ts copies it out into an archive first).
 *
 * Docker restores only with POST /containers/{id}/start?checkpoint=<name>,
 * and only from the container's own checkpoint directory
 * (<DockerRootDir>/containers/<id>/checkpoints/<name>): it refuses
 * checkpoint-dir on start ("custom checkpointdir is not supported"). So:
 *   CreateContainer  the container is created from the checkpoint's image
 *                    with the request's configuration, then staged: CRIU's
 *                    images written to that directory, rootfs-diff.tar put
 *                    into its filesystem through Docker's archive endpoint,
 *                    deleted.files applied as overlay2 whiteouts
 *                    (overlay-whiteouts.ts); on any failure it is removed.
 *   StartContainer   starts it from that checkpoint: CRIU restores the
 *                    processes, with their memory, in the new container's
 *                    namespaces and cgroup (runc joins the pod's network
 *                    namespace as the external one the dump recorded).
 *
 * This needs what the dump needed (dockerd with --experimental, criu) and
 * cridock on the same filesystem as dockerd's root directory, which a node's
 * cridock always is; otherwise the answer says which is missing.
 */
import { createWriteStream } from "node:fs";
import { mkdir, readFile, rm, stat } from "node:fs/promises";
import { join, posix } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { DockerClient } from "../../docker/client.ts";
import { DockerError } from "../../docker/errors.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { CridockError, failedPrecondition, invalidArgument, notFound, withContext } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { CRIDOCK_PREFIX } from "../labels.ts";
import { readCheckpointArchive, type CheckpointArchiveMetadata } from "./checkpoint-archive-read.ts";
import { NOT_EXPERIMENTAL } from "./checkpoint.ts";
import type { ContextImages, ResolvedImage } from "./create-context.ts";
import type { CheckpointImages } from "./checkpoint-image.ts";
import { overlayDirectories, whiteOut } from "./overlay-whiteouts.ts";

/** Set on a container created from a checkpoint: StartContainer restores it. Its value names the archive or the checkpoint image. */
export const RESTORE_LABEL = `${CRIDOCK_PREFIX}restore-from`;
/** The checkpoint's name in the container's checkpoint directory. */
export const RESTORE_CHECKPOINT = "cridock-restore";

/** An image reference never starts with "/": such an "image" is a checkpoint archive's path. */
export function isCheckpointArchivePath(image: string): boolean {
  return image.startsWith("/");
}

export interface RestorePlan {
  /** The archive file to read: the path CreateContainer named, or a copy of a checkpoint image's layer. */
  archive: string;
  /** What the restore is from, as messages and the container's RESTORE_LABEL name it. */
  source: string;
  metadata: CheckpointArchiveMetadata;
  /** The checkpointed container's image, found on this node. */
  image: ResolvedImage;
  /** The name ContainerStatus reports for it. */
  imageName: string;
  /** Removes what the plan made (a checkpoint image's archive copy); called once the container is staged or its creation failed. */
  release(): Promise<void>;
}

export interface RestoreResult {
  imageFiles: number;
  rootfsDiff: boolean;
  whiteouts: number;
}

export class ContainerRestorer {
  constructor(
    private readonly docker: DockerClient,
    private readonly images: ContextImages,
    private readonly checkpointImages: CheckpointImages,
    private readonly log: Logger,
  ) {}

  /**
   * Checks the archive at a path CreateContainer named and finds its image,
   * before anything is created. `source`: what messages name it (the path,
   * or what the path is a copy of).
   */
  async plan(archive: string, signal?: AbortSignal, source = archive): Promise<RestorePlan> {
    if (archive.includes("\0") || posix.normalize(archive) !== archive) {
      throw invalidArgument(`image ${JSON.stringify(archive)} is a path, but not a clean absolute path of a checkpoint archive`);
    }
    let info;
    try {
      info = await stat(archive);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw notFound(`checkpoint archive ${archive} does not exist`, err);
      throw invalidArgument(`checkpoint archive ${archive} cannot be read`, err);
    }
    if (!info.isFile()) throw invalidArgument(`checkpoint archive ${archive} is not a regular file`);
    const metadata = await readCheckpointArchive(archive, undefined, signal, source);
    await this.requireExperimental(source);
    return { ...(await this.findImage(source, metadata)), archive, source, metadata, release: async () => undefined };
  }

  /**
   * The plan for a checkpoint image (checkpoint-image.ts), undefined for
   * any other image. Its checkpoint is copied into an archive of cridock's
   * own first, which `release` removes.
   */
  async planFromImage(reference: string, image: ResolvedImage, signal?: AbortSignal): Promise<RestorePlan | undefined> {
    if (!(await this.checkpointImages.holdsCheckpoint(image.id, image.inspect?.Config))) return undefined;
    const source = `checkpoint image ${reference}`;
    // Refused before the image's checkpoint is copied out.
    await this.requireExperimental(source);
    const copy = await this.checkpointImages.copyToArchive(image.id, signal);
    try {
      const metadata = await readCheckpointArchive(copy.path, undefined, signal, source);
      return { ...(await this.findImage(source, metadata)), archive: copy.path, source, metadata, release: copy.release };
    } catch (err) {
      await copy.release();
      throw err;
    }
  }

  private async requireExperimental(source: string): Promise<void> {
    if (!(await this.docker.info()).ExperimentalBuild) {
      throw new CridockError("UNIMPLEMENTED", `cannot restore from ${source}: ${NOT_EXPERIMENTAL}`);
    }
  }

  /** The checkpointed container's image on this node: by id, then by the names config.dump gives. */
  private async findImage(source: string, metadata: CheckpointArchiveMetadata): Promise<Pick<RestorePlan, "image" | "imageName">> {
    const { rootfsImageRef, rootfsImageName, rootfsImage } = metadata.config;
    const names = [...new Set([rootfsImageRef, rootfsImageName, rootfsImage].filter((n): n is string => Boolean(n)))];
    for (const name of names) {
      try {
        const image = await this.images.resolveImage(name);
        return { image, imageName: rootfsImage || rootfsImageName || name };
      } catch (err) {
        if (!(err instanceof CridockError && (err.code === "NOT_FOUND" || err.code === "INVALID_ARGUMENT"))) throw err;
      }
    }
    throw notFound(`the image checkpointed in ${source} (${names.join(", ")}) is not present; pull it first`);
  }

  /**
   * Puts the archive's checkpoint and filesystem changes into the created
   * container `c`. The caller removes the container when this fails.
   */
  async stage(c: ContainerInspect, plan: RestorePlan, signal?: AbortSignal): Promise<RestoreResult> {
    const root = (await this.docker.info()).DockerRootDir;
    const containerRoot = join(root, "containers", c.Id);
    try {
      await stat(containerRoot);
    } catch (err) {
      throw failedPrecondition(
        `cannot restore from ${plan.source}: dockerd's directory of the container, ${containerRoot}, is not visible to cridock (Docker restores only from there; cridock must run on dockerd's host filesystem)`,
        err,
      );
    }
    const { deleted } = plan.metadata;
    const overlay = overlayDirectories(c.GraphDriver);
    if (deleted.length > 0 && !overlay) {
      throw failedPrecondition(
        `cannot restore from ${plan.source}: the checkpointed container deleted ${deleted.length} path(s) of its image (${deleted.slice(0, 3).join(", ")}), ` +
          `and cridock can delete files of a created container only on the overlay2 storage driver (dockerd's is ${c.GraphDriver?.Name ?? "unknown"})`,
      );
    }
    const target = join(containerRoot, "checkpoints", RESTORE_CHECKPOINT);
    await rm(target, { recursive: true, force: true });
    await mkdir(target, { recursive: true, mode: 0o700 });
    let rootfsDiff = false;
    await readCheckpointArchive(
      plan.archive,
      {
        imageDirectory: async (name) => void (await mkdir(join(target, name), { recursive: true, mode: 0o700 })),
        imageFile: (name, body) => pipeline(Readable.from(body), createWriteStream(join(target, name), { flags: "wx", mode: 0o600 })),
        rootfsDiff: async (body) => {
          await this.docker.putContainerArchive(c.Id, "/", Readable.from(body), signal).catch((err: unknown) => {
            throw withContext(`putting rootfs-diff.tar of ${plan.source} into container ${c.Id.slice(0, 12)}`, err, "UNKNOWN");
          });
          rootfsDiff = true;
        },
      },
      signal,
      plan.source,
    );
    const whiteouts = overlay && deleted.length > 0 ? await whiteOut(overlay, deleted) : 0;
    const result = { imageFiles: plan.metadata.imageFiles, rootfsDiff, whiteouts };
    this.log.info({ container: c.Id, source: plan.source, ...result }, "staged a container's restore from a checkpoint archive");
    return result;
  }
}

/**
 * Where CRIU put the restored processes: runc (1.1, and 1.2 as far as its
 * code reads) gives CRIU a cgroup root only on cgroup v1. On cgroup v2
 * CRIU restores them into the cgroup path recorded in its images, which is
 * the checkpointed container's (measured on Debian 12: runc 1.1.5, CRIU
 * 3.17, the systemd driver): the new container's own scope, made for
 * CRIU's process, is then empty and gone, its limits apply to nothing, and
 * the restored processes live and die with the other container's cgroup.
 * CRIU's `manage-cgroups ignore` (in the configuration file runc hands it,
 * /etc/criu/runc.conf) leaves them in the cgroup runc started CRIU in,
 * which is the new container's.
 *
 * Returns the restored init's cgroup path when it is not the container's
 * own (its path names the container's id on either cgroup driver), or
 * undefined when it is, or when there is no process to look at.
 */
export async function misplacedRestoreCgroup(id: string, pid: number, read = (path: string) => readFile(path, "utf8")): Promise<string | undefined> {
  if (!(pid > 0)) return undefined;
  let text: string;
  try {
    text = await read(`/proc/${pid}/cgroup`);
  } catch {
    return undefined; // exited already: nothing misplaced is running
  }
  const lines = text.split("\n").filter(Boolean);
  const unified = lines.find((l) => l.startsWith("0::"));
  const memory = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  const path = (unified ?? memory)?.replace(/^[^:]*:[^:]*:/, "");
  return path !== undefined && !path.includes(id) ? path : undefined;
}

export const CRIU_CGROUP_REMEDY =
  "put `manage-cgroups=ignore` in /etc/criu/runc.conf (the CRIU configuration runc uses), so that CRIU leaves the restored processes in the container's own cgroup";

/** StartContainer's failure to restore, said as an operator needs it. */
export function restoreStartFailure(err: unknown, archive: string, id: string): CridockError {
  if (err instanceof DockerError && (err.statusCode === 501 || /experimental/i.test(err.dockerMessage))) {
    return new CridockError("UNIMPLEMENTED", `cannot restore container ${id} from ${archive}: ${NOT_EXPERIMENTAL}`, { cause: err });
  }
  return withContext(`restoring container ${id} from checkpoint archive ${archive} (CRIU, through Docker's start)`, err, "UNKNOWN");
}
