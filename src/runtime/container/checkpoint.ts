/**
 * CheckpointContainer (KEP-2008, "forensic container checkpointing") on
 * Docker's checkpoint API: CRIU dumps the running container's processes
 * (which run on: Exit false) into a directory of cridock's own, and cridock
 * packs those images with the container's metadata and root filesystem
 * changes into the archive kubelet asked for, in the layout CRI-O writes and
 * checkpointctl reads (checkpoint-archive.ts).
 *
 * Docker serves checkpoints only when dockerd runs with --experimental and
 * criu is installed; otherwise the call is UNIMPLEMENTED saying so. Whatever
 * fails, the dump directory is removed and nothing is left at the location.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { DockerError } from "../../docker/errors.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { CridockError, deadlineExceeded, describeCause, failedPrecondition, notFound } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { StepTimer } from "../../steps.ts";
import { SANDBOX_ID_LABEL } from "../labels.ts";
import { parseName } from "../naming.ts";
import type { SandboxLookup } from "../sandbox/view.ts";
import { ARCHIVE, writeCheckpointArchive, writeTarAtomically } from "./checkpoint-archive.ts";
import { checkpointIdentity, configDump, specDump, type CheckpointIdentity, type OciSpec } from "./checkpoint-metadata.ts";
import { dockerContainerFiles, packRootfsDiff, planRootfsDiff } from "./rootfs-diff.ts";

/**
 * Where containerd keeps the bundles of Docker's containers (namespace
 * "moby"), whose config.json is the OCI spec a container runs with: a
 * system containerd's, and the one dockerd starts for itself.
 */
export const DOCKER_BUNDLE_DIRECTORIES = [
  "/run/containerd/io.containerd.runtime.v2.task/moby",
  "/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby",
];

/** CheckpointID: Docker puts CRIU's images in CheckpointDir/CheckpointID. */
const IMAGES_NAME = "criu";
/** Under cridock's root directory: CRIU's dumps, and the archives copied out of checkpoint images (checkpoint-image.ts). */
export const CHECKPOINT_WORK_DIRECTORY = "checkpoint-work";
/** Work entries older than this are leftovers (of a dump Docker finished after cridock gave up on it, of a crash). */
const STALE_WORK_MS = 6 * 3600_000;

export const NOT_EXPERIMENTAL = "dockerd runs without --experimental; Docker serves checkpoints only in experimental mode";

export interface CheckpointerOptions {
  docker: DockerClient;
  sandboxes: SandboxLookup;
  log: Logger;
  /** cridock's root directory: CRIU's images are dumped under <root>/checkpoint-work/ and removed after. */
  rootDirectory: string;
  /** Overrides DOCKER_BUNDLE_DIRECTORIES (tests). */
  bundleDirectories?: readonly string[];
}

export interface CheckpointResult {
  location: string;
  bytes: number;
  /** Paths copied into rootfs-diff.tar, and listed in deleted.files. */
  copied: number;
  deleted: number;
}

export class ContainerCheckpointer {
  private readonly docker: DockerClient;
  private readonly log: Logger;
  private readonly workRoot: string;

  constructor(private readonly options: CheckpointerOptions) {
    this.docker = options.docker;
    this.log = options.log;
    this.workRoot = join(options.rootDirectory, CHECKPOINT_WORK_DIRECTORY);
  }

  /**
   * Checkpoints `c` (found and checked to be a CRI container by the caller)
   * to `location` (checked by checkpoint-request.ts) within `deadlineMs`
   * (0: none but the caller's), or until `signal` aborts.
   */
  async checkpoint(c: ContainerInspect, location: string, deadlineMs: number, signal: AbortSignal): Promise<CheckpointResult> {
    const what = `container ${c.Id.slice(0, 12)}`;
    if (c.State.Status !== "running" && c.State.Status !== "paused") {
      throw failedPrecondition(`cannot checkpoint ${what}: it is ${c.State.Status}; only a running container can be checkpointed`);
    }
    const timeout = deadlineMs > 0 ? AbortSignal.timeout(deadlineMs) : undefined;
    const deadline = timeout ? AbortSignal.any([signal, timeout]) : signal;
    const timer = new StepTimer("CheckpointContainer");
    try {
      const info = await timer.time("docker.info", () => this.docker.info());
      if (!info.ExperimentalBuild) throw new CridockError("UNIMPLEMENTED", `cannot checkpoint ${what}: ${NOT_EXPERIMENTAL}`);
      const sandbox = await this.sandboxOf(c);
      const result = await this.dumpAndPack(c, location, sandbox, deadline, timer);
      this.log.info({ container: c.Id, location, bytes: result.bytes, copied: result.copied, deleted: result.deleted }, "checkpointed container");
      timer.finish(this.log, { container: c.Id });
      return result;
    } catch (err) {
      if (timeout?.aborted && !signal.aborted) {
        throw deadlineExceeded(`checkpointing ${what} did not finish within ${deadlineMs / 1000} s`, err);
      }
      if (signal.aborted && signal.reason instanceof CridockError) throw signal.reason;
      throw err;
    }
  }

  private async dumpAndPack(
    c: ContainerInspect,
    location: string,
    sandbox: SandboxFacts,
    signal: AbortSignal,
    timer: StepTimer,
  ): Promise<CheckpointResult> {
    const work = await this.makeWorkDirectory(c.Id);
    try {
      await timer.time("docker.checkpoint", () => this.dump(c, work, sandbox, signal));
      const checkpointedAt = new Date();
      const [changes, bundleSpec, repoTags] = await Promise.all([
        timer.time("docker.changes", () => this.docker.containerChanges(c.Id, signal)),
        this.bundleSpec(c.Id),
        this.docker.inspectImage(c.Image).then((i) => i.RepoTags ?? [], () => []),
      ]);
      const who = checkpointIdentity(c, sandbox.identity, repoTags);
      const plan = planRootfsDiff(changes, (c.Mounts ?? []).map((m) => m.Destination));
      const diffTar = join(work, ARCHIVE.rootfsDiffTar);
      let copied = 0;
      if (plan.copy.length > 0) {
        await timer.time("rootfs.diff", () =>
          writeTarAtomically(diffTar, async (pack) => void (copied = await packRootfsDiff(pack, dockerContainerFiles(this.docker, c.Id, signal), plan, signal)), signal),
        );
      }
      await timer.time("archive.write", () =>
        writeCheckpointArchive(
          location,
          {
            imagesDirectory: join(work, IMAGES_NAME),
            configDump: configDump(c, who, checkpointedAt),
            specDump: specDump(c, who, bundleSpec),
            rootfsDiffTar: copied > 0 ? diffTar : undefined,
            deletedFiles: plan.deleted,
          },
          signal,
        ),
      );
      const bytes = (await stat(location)).size;
      return { location, bytes, copied, deleted: plan.deleted.length };
    } finally {
      await rm(work, { recursive: true, force: true }).catch((err) => this.log.warn({ container: c.Id, work, err }, "could not remove a checkpoint's dump directory"));
    }
  }

  /** CRIU's dump through Docker, its failures said as an operator needs them. */
  private async dump(c: ContainerInspect, work: string, sandbox: SandboxFacts, signal: AbortSignal): Promise<void> {
    const what = `container ${c.Id.slice(0, 12)}`;
    try {
      await this.docker.createCheckpoint(c.Id, { CheckpointID: IMAGES_NAME, CheckpointDir: work, Exit: false }, signal);
    } catch (err) {
      if (!(err instanceof DockerError)) throw err;
      // The daemon's mode changed since /info (a restart), or a daemon that reports no ExperimentalBuild.
      if (err.statusCode === 501 || /experimental/i.test(err.dockerMessage)) {
        throw new CridockError("UNIMPLEMENTED", `cannot checkpoint ${what}: ${NOT_EXPERIMENTAL}`, { cause: err });
      }
      if (err.statusCode === 404) throw notFound(`${what} does not exist (any more)`, err);
      if (/not running/i.test(err.dockerMessage)) throw failedPrecondition(`cannot checkpoint ${what}: it is not running`, err);
      const log = await criuLogExcerpt(err.dockerMessage);
      if (sandbox.hostNetwork) {
        throw failedPrecondition(
          `cannot checkpoint ${what}: its pod uses the host's network namespace, which CRIU could not checkpoint: ${err.dockerMessage}${log}`,
          err,
        );
      }
      throw new CridockError(err.code, `checkpointing ${what} failed in Docker (CRIU): ${err.dockerMessage}${log}`, { cause: err });
    }
  }

  private async sandboxOf(c: ContainerInspect): Promise<SandboxFacts> {
    const id = c.Config.Labels?.[SANDBOX_ID_LABEL] ?? "";
    try {
      const view = await this.options.sandboxes.view(id);
      return { identity: { id: view.id, metadata: view.metadata }, hostNetwork: view.hostNetwork };
    } catch (err) {
      // The archive can still name the pod from the container's Docker name.
      this.log.warn({ container: c.Id, sandbox: id, err }, "checkpoint: the container's sandbox could not be looked up");
      const pod = parseName(c.Name)?.pod ?? { name: "", namespace: "", uid: "" };
      return { identity: { id, metadata: { ...pod, attempt: 0 } }, hostNetwork: c.HostConfig.NetworkMode === "host" };
    }
  }

  /** A fresh dump directory; leftovers of dumps given up on long ago are removed first. */
  private async makeWorkDirectory(id: string): Promise<string> {
    await mkdir(this.workRoot, { recursive: true, mode: 0o700 });
    const now = Date.now();
    for (const name of await readdir(this.workRoot).catch(() => [] as string[])) {
      const path = join(this.workRoot, name);
      const info = await stat(path).catch(() => undefined);
      if (info && now - info.mtimeMs > STALE_WORK_MS) await rm(path, { recursive: true, force: true }).catch(() => undefined);
    }
    return mkdtemp(join(this.workRoot, `${id.slice(0, 12)}-`));
  }

  /** The OCI spec Docker runs the container with, from containerd's bundle; undefined when cridock cannot read it. */
  private async bundleSpec(id: string): Promise<OciSpec | undefined> {
    for (const dir of this.options.bundleDirectories ?? DOCKER_BUNDLE_DIRECTORIES) {
      try {
        return JSON.parse(await readFile(join(dir, id, "config.json"), "utf8")) as OciSpec;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") this.log.debug({ container: id, dir, err }, "checkpoint: unreadable bundle spec");
      }
    }
    return undefined;
  }
}

interface SandboxFacts {
  identity: CheckpointIdentity["sandbox"];
  hostNetwork: boolean;
}

/**
 * Docker's message names CRIU's log when the dump failed ("… path=
 * /run/…/criu-dump.log …"); its last error lines say why, where this
 * process can read it.
 */
export async function criuLogExcerpt(dockerMessage: string, maxLines = 3): Promise<string> {
  const path = /(\/[^\s:"']*\.log)\b/.exec(dockerMessage)?.[1];
  if (!path) return "";
  try {
    const text = await readFile(path, "utf8");
    const errors = text.split("\n").filter((l) => /Error|error/.test(l));
    if (errors.length === 0) return "";
    return `; CRIU's log ${path} ends with: ${errors.slice(-maxLines).map((l) => l.trim()).join(" | ")}`;
  } catch (err) {
    return `; CRIU's log ${path} could not be read: ${describeCause(err)}`;
  }
}
