/**
 * Container lifecycle on dockerd: create, start, stop, remove, status, list,
 * resource updates and log reopening. Docker is the source of truth; every
 * container carries the labels that let a restarted cridock (or cri-dockerd)
 * recognise it, and its CRI log file is written by a LogFollower.
 */
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { isConflict, isNotFound } from "../../docker/errors.ts";
import type { ContainerInspect, ContainerSummary, DockerFilters } from "../../docker/types.ts";
import { CridockError, failedPrecondition, notFound, withContext } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { LogFollowers } from "../../logs/followers.ts";
import { hostCapabilities, privilegedStartFailure } from "./capabilities.ts";
import { createBody, validateSpec, type CreateOptions } from "./create.ts";
import { createMissingHostPaths } from "./mounts.ts";
import { createContext, type ContextImages, type ResolvedImage } from "./create-context.ts";
import type { ImageFileReader, ImageTreeReader } from "../image-files.ts";
import type { ContainerFilterSpec, ContainerInfo, ContainerSpec, ContainerSummaryInfo, ResourceSpec } from "./spec.ts";
import { containerInfo, MOUNTS_LABEL, parseMountsLabel, processUser, startFailed, summaryInfo } from "./convert.ts";
import { KeyedMutex } from "../keyed-mutex.ts";
import { LOG_PATH_LABEL, ROOT_LABEL, SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL, matchesSelector } from "../labels.ts";
import { findByIdOrPrefix, removedMeanwhile, validateId } from "../lookup.ts";
import { containerName } from "../naming.ts";
import { ContainerResizer } from "./resize.ts";
import type { SandboxLookup, SandboxView } from "../sandbox/view.ts";
import { StepTimer } from "../../steps.ts";
import { CgroupReader } from "../../stats/cgroups.ts";
import { type CgroupDriver, UnifiedCgroups } from "./unified-cgroup.ts";
import { UnifiedSettings, type UnifiedStart } from "./unified-settings.ts";
import { KernelOomLog, type OomKillLookup } from "./kernel-oom-log.ts";
import { CHECKPOINT_WORK_DIRECTORY, ContainerCheckpointer, type CheckpointResult } from "./checkpoint.ts";
import { checkedLocation, checkpointDeadlineMs } from "./checkpoint-request.ts";
import { CheckpointImages } from "./checkpoint-image.ts";
import type { OciLayer } from "../../oci/layer.ts";
import { SpecEditsStore } from "../../oci/edits-store.ts";
import { SPEC_EDITS_VERSION, type SpecEdits } from "../../oci/spec-edits.ts";
import type { UsernsSupport } from "../../oci/userns-support.ts";
import { checkPodUserns, createInUserns, idmappedMounts, usernsEdit, usernsFromLabels, usernsLayer } from "../pod-userns.ts";
import { checkStartRuntime, createForMountOptions, mountOptionsEdits, mountOptionsLayer, type MountOptionsProbe } from "./mount-options.ts";
import {
  CRIU_CGROUP_REMEDY,
  ContainerRestorer,
  RESTORE_CHECKPOINT,
  RESTORE_LABEL,
  isCheckpointArchivePath,
  misplacedRestoreCgroup,
  restoreStartFailure,
  type RestorePlan,
} from "./checkpoint-restore.ts";

export type ImageResolver = ContextImages;

export interface ContainerManagerOptions extends CreateOptions {
  docker: DockerClient;
  sandboxes: SandboxLookup;
  images: ImageResolver;
  logs: LogFollowers;
  log: Logger;
  /** Reads image files without running the image (Strict's /etc/passwd, image volume sub-paths, checkpoint images). */
  files: ImageFileReader & ImageTreeReader;
  /** Docker's cgroup driver, asked for `unified` keys only (a cgroup parent is a slice name under systemd). */
  cgroupDriver?: () => Promise<CgroupDriver>;
  /** The cgroup tree containers run in (tests give a fake one). */
  cgroups?: CgroupReader;
  /** OOM kills Docker missed (default: the kernel log, kernel-oom-log.ts). */
  oomKills?: OomKillLookup;
  /** The deadline of a CheckpointContainer that names none (cridock's --runtime-request-timeout); 0: none. */
  requestTimeoutMs?: number;
  /** Where containerd keeps Docker's bundles (checkpoint.ts's default otherwise; tests). */
  bundleDirectories?: readonly string[];
  /** cridock's OCI runtime layer, when dockerd has it (src/oci/layer.ts). */
  ociLayer?: () => Promise<OciLayer | undefined>;
  /** Whether the node can give pods their own user namespace (src/oci/userns-support.ts). */
  userns?: () => Promise<UsernsSupport>;
  /** Whether the node honours bind mount options (src/oci/mount-options.ts). */
  mountOptions?: MountOptionsProbe;
}

const FULL_ID = /^[0-9a-f]{64}$/;
/** At most this many known container ids are kept (see ContainerManager.known). */
const MAX_KNOWN = 8192;
/** How long ContainerStatus waits for an exited container's log writer to finish. */
const LOG_DRAIN_WAIT_MS = 2000;
/** The exit code of a process the kernel killed with SIGKILL, as the OOM killer does. */
const SIGKILL_EXIT = 137;

interface InspectOptions {
  /** Docker's inspect may come from the client's event-checked cache (a frozen object): for reads only. */
  cached?: boolean;
}

export class ContainerManager {
  private readonly docker: DockerClient;
  private readonly log: Logger;
  /** Start, stop, remove and reopen of one container do not overlap. */
  private readonly locks = new KeyedMutex();
  private readonly resizer: ContainerResizer;
  private readonly unified: UnifiedSettings;
  private readonly oomKills: OomKillLookup;
  private readonly checkpointer: ContainerCheckpointer;
  private readonly restorer: ContainerRestorer;
  /**
   * The converted summary per container, reused while Docker reports the
   * same summary (a container's labels never change; its state, name and
   * image are in the key). Frozen: the CRI layer caches encodings by object.
   */
  private readonly summaries = new Map<string, { key: string; info: ContainerSummaryInfo }>();
  /**
   * For containers Docker lists as "created": whether their start failed
   * (Docker's list cannot say; an inspect can). Learnt once per container,
   * or set by this cridock's own failed StartContainer, which always wins.
   */
  private readonly startFailures = new Map<string, boolean>();
  /**
   * Full ids known to be CRI containers (created, started or listed by this
   * cridock; a container's type label never changes): Stop and Remove call
   * Docker with them straight away, as they would after an inspect that
   * found them, instead of inspecting first. Docker's 404 still means gone.
   */
  private readonly known = new Set<string>();

  constructor(private readonly options: ContainerManagerOptions) {
    this.docker = options.docker;
    this.log = options.log.child({ component: "containers" });
    const cgroups = options.cgroups ?? new CgroupReader();
    const files = new UnifiedCgroups(cgroups);
    this.unified = new UnifiedSettings(options.docker, files, this.log, options.cgroupDriver, options.ociLayer);
    this.resizer = new ContainerResizer(options.docker, cgroups, files, options.oomScore);
    this.oomKills = options.oomKills ?? new KernelOomLog(this.log);
    const rootDirectory = options.rootDirectory || "/var/lib/cridock";
    this.checkpointer = new ContainerCheckpointer({
      docker: options.docker,
      sandboxes: options.sandboxes,
      log: this.log,
      rootDirectory,
      bundleDirectories: options.bundleDirectories,
    });
    const checkpointImages = new CheckpointImages(options.files, join(rootDirectory, CHECKPOINT_WORK_DIRECTORY));
    this.restorer = new ContainerRestorer(options.docker, options.images, checkpointImages, this.log);
  }

  /**
   * `restoreSource`: what a restore from an archive path is from, as its
   * messages and label name it, when the path is a copy (RestorePod's).
   */
  async create(sandboxId: string, requested: ContainerSpec, { restoreSource }: { restoreSource?: string } = {}): Promise<string> {
    validateSpec(requested);
    const timer = new StepTimer("CreateContainer");
    const view = await timer.time("sandbox.view", () => this.options.sandboxes.view(sandboxId));
    const { image, restore } = await this.imageOrCheckpoint(requested.image, timer, restoreSource);
    try {
      // A restore creates the container from the checkpointed container's image.
      const spec = restore ? { ...requested, image: restore.imageName, userImage: restore.imageName } : requested;
      return await this.createFrom(view, spec, image, restore, timer);
    } finally {
      await restore?.release();
    }
  }

  /**
   * The image to create from, and the restore when it is a checkpoint
   * (checkpoint-restore.ts): an "image" that is a path is a checkpoint
   * archive; a checkpoint image (checkpoint-image.ts) is recognised once
   * resolved.
   */
  private async imageOrCheckpoint(reference: string, timer: StepTimer, restoreSource?: string): Promise<{ image: ResolvedImage; restore?: RestorePlan }> {
    if (isCheckpointArchivePath(reference)) {
      const restore = await timer.time("restore.plan", () => this.restorer.plan(reference, undefined, restoreSource));
      return { image: restore.image, restore };
    }
    const image = await timer.time("image.resolve", () => this.options.images.resolveImage(reference));
    const restore = await timer.time("restore.plan", () => this.restorer.planFromImage(reference, image));
    return { image: restore?.image ?? image, restore };
  }

  private async createFrom(view: SandboxView, spec: ContainerSpec, image: ResolvedImage, restore: RestorePlan | undefined, timer: StepTimer): Promise<string> {
    let targetId = "";
    if (spec.security?.pidMode === "target") {
      const target = await findByIdOrPrefix(this.docker, TYPE_CONTAINER, spec.security.targetId, "target container");
      if (!target) throw notFound(`target container ${spec.security.targetId} of the PID namespace does not exist`);
      targetId = target.Id;
    }
    const context = await timer.time("engine.context", () =>
      createContext(spec, { id: image.id, user: image.inspect?.Config?.User }, { docker: this.docker, images: this.options.images, files: this.options.files }),
    );
    const unified = Object.keys(spec.resources?.unified ?? {});
    if (unified.length > 0) context.cgroupVersion = await timer.time("cgroup.unified", () => this.unified.checkBeforeCreate(unified, view));
    // Asked before anything is made on the host: a node that cannot honour the options creates nothing.
    const what = `container ${spec.name} of pod ${view.metadata.namespace}/${view.metadata.name}`;
    const mountOptions = mountOptionsEdits(spec.mounts);
    const optionsLayer = mountOptions.length > 0 ? await mountOptionsLayer(this.options.mountOptions, what, mountOptions) : undefined;
    const created = await timer.time("mounts.mkdir", () => createMissingHostPaths(spec.mounts));
    if (created.length > 0) this.log.info({ sandbox: view.id, name: spec.name, paths: created }, "created missing host paths of mounts as directories");
    const body = await createBody(spec, view, image.id, targetId, this.options, context);
    const userns = checkPodUserns(spec.security?.userns, view, spec.name, spec.mounts);
    if (userns) createInUserns(body, userns, await usernsLayer(this.options.userns, `container ${spec.name} of pod ${view.metadata.namespace}/${view.metadata.name}`));
    const runtime = userns ? undefined : await this.unified.runtimeForCreate(spec.resources?.unified ?? {}, body.HostConfig ?? {}, context.cgroupVersion);
    if (runtime) body.HostConfig = { ...body.HostConfig, Runtime: runtime };
    if (optionsLayer) createForMountOptions(body, optionsLayer, what);
    if (restore) body.Labels = { ...body.Labels, [RESTORE_LABEL]: restore.source };
    const name = containerName({ name: spec.name, attempt: spec.attempt }, view.metadata);
    const id = await timer.time("docker.create", () => this.createNamed(name, body));
    this.remember(id);
    if (restore) await timer.time("restore.stage", () => this.stageRestore(id, restore));
    this.log.info({ container: id, name, sandbox: view.id }, "created container");
    timer.finish(this.log, { container: id });
    return id;
  }

  /**
   * Creates under `name`, which reserves the (sandbox, name, attempt): while
   * a container holds it, in any state, a second create is ALREADY_EXISTS
   * naming that container (containerd's rule). The holder is never removed
   * here, so racing creates cannot destroy each other's container.
   */
  private async createNamed(name: string, body: Parameters<DockerClient["createContainer"]>[1]): Promise<string> {
    try {
      return (await this.docker.createContainer(name, body)).Id;
    } catch (err) {
      if (!isConflict(err) && !(err instanceof CridockError && err.code === "ALREADY_EXISTS")) {
        throw withContext(`creating container ${name}`, err, "UNKNOWN");
      }
      const holder = await this.docker.inspectContainer(name).catch(() => undefined);
      throw new CridockError(
        "ALREADY_EXISTS",
        holder
          ? `container ${name} already exists as ${holder.Id} (${holder.State.Status}); remove it first or use another attempt`
          : `the container name ${name} is taken by a container being removed; retry`,
        { cause: err },
      );
    }
  }

  /** The archive's checkpoint put into the created container; on failure the container goes. */
  private async stageRestore(id: string, plan: RestorePlan): Promise<void> {
    try {
      await this.restorer.stage(await this.docker.inspectContainer(id), plan);
    } catch (err) {
      await this.docker.removeContainer(id, { force: true }).catch((e) => this.log.warn({ container: id, err: e }, "could not remove a container whose restore failed"));
      throw withContext(`restoring container ${id.slice(0, 12)} from ${plan.source}`, err, "UNKNOWN");
    }
  }

  /**
   * A restored container whose processes CRIU put in another container's
   * cgroup (checkpoint-restore.ts) is not left running so: its limits would
   * apply to nothing. It is killed (its init only: a kill of the cgroup
   * would reach the other container), with its output copied, and the
   * start fails saying how to configure CRIU.
   */
  private async checkRestoredCgroup(fullId: string, id: string, archive: string, startLogs?: () => Promise<void>): Promise<void> {
    const pid = (await this.docker.inspectContainer(fullId)).State.Pid;
    const misplaced = await misplacedRestoreCgroup(fullId, pid);
    if (!misplaced) return;
    await this.docker.killContainer(fullId).catch((e) => this.log.warn({ container: fullId, err: e }, "could not stop a restored container in another cgroup"));
    if (startLogs) await startLogs().catch(() => undefined);
    throw failedPrecondition(
      `restoring container ${id} from ${archive}: CRIU restored its processes into the cgroup ${misplaced}, which is not the container's own ` +
        `(runc gives CRIU no cgroup root on cgroup v2, and the images name the checkpointed container's); the container was stopped. ${CRIU_CGROUP_REMEDY}`,
    );
  }

  async start(id: string): Promise<void> {
    const timer = new StepTimer("StartContainer");
    // One inspect, under the lock (a full id needs no lookup before it).
    const fullId = await timer.time("docker.list", () => this.fullIdOf(id));
    if (!fullId) throw notFound(`container ${id} does not exist`);
    await this.locks.run(fullId, async () => {
      const c = await timer.time("docker.inspect", () => this.inspectOwn(fullId));
      if (!c) throw notFound(`container ${id} does not exist`);
      this.remember(c.Id);
      if (c.State.Status !== "created" || c.State.ExitCode !== 0) {
        throw failedPrecondition(`container ${id} is ${c.State.Status} and cannot be started again; create a new one`);
      }
      const logPath = c.Config.Labels?.[LOG_PATH_LABEL] ?? "";
      // Planned before the start: a key this node cannot carry out (cgroup v1) starts nothing.
      const unified = await this.unified.planStart(c);
      const edits = await this.specEdits(c, id, unified);
      const restoreFrom = c.Config.Labels?.[RESTORE_LABEL];
      try {
        const checkpoint = restoreFrom ? RESTORE_CHECKPOINT : undefined;
        const start = () => this.docker.startContainer(c.Id, { checkpoint });
        const onRemoveError = (err: unknown) => this.log.warn({ container: c.Id, err }, "could not remove a container's spec edits");
        await timer.time(restoreFrom ? "docker.start.restore" : "docker.start", () => (edits ? edits.store.around(c.Id, edits.edits, start, onRemoveError) : start()));
      } catch (err) {
        this.startFailures.set(c.Id, true);
        // Docker reports no "die" for a start that failed: say it, for GetContainerEvents.
        this.docker.events.announce({
          id: c.Id,
          action: "die",
          timeNanos: BigInt(Date.now()) * 1_000_000n,
          attributes: { ...c.Config.Labels, name: c.Name.replace(/^\//, "") },
        });
        if (logPath) await this.options.logs.touch(c.Id, logPath).catch(() => undefined);
        if (restoreFrom) throw restoreStartFailure(err, restoreFrom, id);
        const refused = c.HostConfig.Privileged
          ? privilegedStartFailure(err, await hostCapabilities().catch(() => undefined), `container ${id}`)
          : undefined;
        throw withContext(`starting container ${id}`, refused ?? err, "UNKNOWN");
      }
      const startLogs = () => this.options.logs.start(c.Id, logPath, Boolean(c.Config.Tty), c.HostConfig.LogConfig?.Type);
      if (restoreFrom) await timer.time("restore.cgroup", () => this.checkRestoredCgroup(c.Id, id, restoreFrom, logPath ? startLogs : undefined));
      let unifiedWindowMs: number | undefined;
      if (unified?.via === "cgroup") {
        try {
          unifiedWindowMs = await this.unified.writeAfterStart(c.Id, unified.files, performance.now(), timer);
        } catch (err) {
          // Not left running half-configured: stopped (as containerd fails a start whose runc
          // cannot write a unified key), with its output copied; kubelet sees the attempt exit.
          await this.docker.killContainer(c.Id).catch((e) => this.log.warn({ container: c.Id, err: e }, "could not stop a container whose unified settings were refused"));
          if (logPath) await startLogs().catch(() => undefined);
          throw withContext(`starting container ${id}`, err, "UNKNOWN");
        }
      }
      if (logPath) await timer.time("logs.start", startLogs);
      this.log.info({ container: c.Id, unifiedWindowMs, unifiedIn: unified?.via, restoredFrom: restoreFrom }, restoreFrom ? "restored container from its checkpoint" : "started container");
      timer.finish(this.log, { container: c.Id });
    });
  }

  /**
   * What the runtime layer adds to the container's spec at its start, and
   * where to leave it: its `unified` keys; for a container of a pod in its
   * own user namespace, the pod's (with kubelet's volumes to idmap); the
   * bind mount options its volumes ask for.
   * undefined when the container needs nothing of the layer.
   */
  private async specEdits(c: ContainerInspect, id: string, unified: UnifiedStart | undefined): Promise<{ store: SpecEditsStore; edits: SpecEdits } | undefined> {
    const edits: SpecEdits = { version: SPEC_EDITS_VERSION, unified: unified?.via === "spec" ? unified.files : undefined };
    let store = unified?.via === "spec" ? unified.store : undefined;
    const mounts = parseMountsLabel(c.Config.Labels?.[MOUNTS_LABEL]);
    const userns = usernsFromLabels(c.Config.Labels);
    if (userns) {
      const layer = await usernsLayer(this.options.userns, `container ${id}`);
      if (c.HostConfig.Runtime !== layer.runtime) throw failedPrecondition(`container ${id} was created for its pod's user namespace without cridock's runtime layer: create it again`);
      edits.userns = usernsEdit(userns, false, idmappedMounts(mounts));
      store = new SpecEditsStore(layer.editsDir);
    }
    const mountOptions = mountOptionsEdits(mounts);
    if (mountOptions.length > 0) {
      const layer = await mountOptionsLayer(this.options.mountOptions, `container ${id}`, mountOptions);
      checkStartRuntime(c, layer, id);
      edits.mountOptions = mountOptions;
      store ??= new SpecEditsStore(layer.editsDir);
    }
    return store ? { store, edits } : undefined;
  }

  /** Stops with a grace period (0 = kill now); OK when the container is gone or already stopped. */
  async stop(id: string, timeoutSeconds: number): Promise<void> {
    // An id that cannot name a Docker container names nothing: idempotent OK.
    if (!/^[0-9a-f]{1,64}$/.test(id)) return;
    const fullId = this.known.has(id) ? id : (await this.find(id))?.Id;
    if (!fullId) return;
    const seconds = Math.max(0, Math.min(timeoutSeconds, 365 * 24 * 3600));
    await this.locks.run(fullId, async () => {
      try {
        await this.docker.stopContainer(fullId, seconds);
      } catch (err) {
        if (isNotFound(err)) return;
        throw withContext(`stopping container ${id}`, err, "UNKNOWN");
      }
    });
  }

  /** Removes, also a running container; OK when it is gone. The CRI log file stays. */
  async remove(id: string): Promise<void> {
    if (!/^[0-9a-f]{1,64}$/.test(id)) return;
    const exists = this.known.has(id) || (await this.find(id));
    const fullId = exists === true ? id : (exists?.Id ?? (FULL_ID.test(id) ? id : undefined));
    if (!fullId) return;
    await this.locks.run(fullId, async () => {
      if (exists) {
        try {
          await this.docker.removeContainer(fullId, { force: true, volumes: true });
        } catch (err) {
          if (!isNotFound(err) && !(await removedMeanwhile(this.docker, fullId))) throw withContext(`removing container ${id}`, err, "UNKNOWN");
        }
      }
      await this.options.logs.forget(fullId);
      this.known.delete(fullId);
      this.summaries.delete(fullId);
      this.startFailures.delete(fullId);
    });
  }

  async status(id: string): Promise<ContainerInfo> {
    // kubelet asks this of every container every few seconds: from memory while Docker's events show no change.
    const c = await this.mustFind(id, { cached: true });
    const info = containerInfo(c);
    if (info.reason === "Error" && c.State.ExitCode === SIGKILL_EXIT && this.oomKills.killedIn(c.Id)) info.reason = "OOMKilled";
    if (info.state === "running") {
      info.user = await processUser(c.State.Pid);
      info.resources = await this.resizer.inForce(c);
    }
    if (info.state === "exited" && this.options.logs.isFollowing(c.Id)) await this.logsDrained(c.Id);
    return info;
  }

  /**
   * An exit is reported once the output is in the log file, as containerd
   * does: readers check the log right after seeing EXITED (kubectl logs,
   * critest). Bounded, so a stuck log writer cannot hang ContainerStatus.
   */
  private async logsDrained(id: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, LOG_DRAIN_WAIT_MS)));
    try {
      await Promise.race([this.options.logs.drained(id), waited]);
    } catch (err) {
      this.log.warn({ container: id, err }, "log writer failed while draining");
    } finally {
      clearTimeout(timer);
    }
  }

  async list(filter: ContainerFilterSpec): Promise<ContainerSummaryInfo[]> {
    // An id that cannot be a Docker id matches nothing (a filter is not a request to validate).
    if (filter.id && !/^[0-9a-f]{1,64}$/.test(filter.id)) return [];
    if (filter.sandboxId && !/^[0-9a-f]{1,64}$/.test(filter.sandboxId)) return [];
    const filters: DockerFilters = { label: [`${TYPE_LABEL}=${TYPE_CONTAINER}`] };
    if (filter.sandboxId) filters.label!.push(`${SANDBOX_ID_LABEL}=${filter.sandboxId}`);
    if (filter.id) filters.id = [filter.id];
    const summaries = await this.docker.listContainers(filters);
    await this.learnStartFailures(summaries);
    const out: ContainerSummaryInfo[] = [];
    const complete = !filter.id && !filter.sandboxId;
    const seen = complete ? new Map<string, { key: string; info: ContainerSummaryInfo }>() : undefined;
    const root = this.options.rootDirectory;
    for (const s of summaries) {
      if (filter.id && !s.Id.startsWith(filter.id)) continue;
      // Another cridock's on the same engine (see sandbox/queries.ts isOwnSandbox); unlabelled ones (older, cri-dockerd's) stay.
      const owner = s.Labels?.[ROOT_LABEL];
      if (root && owner !== undefined && owner !== root) continue;
      const info = this.summaryOf(s);
      this.remember(s.Id);
      seen?.set(s.Id, this.summaries.get(s.Id)!);
      if (filter.state && info.state !== filter.state) continue;
      if (!matchesSelector(info.labels, filter.labelSelector)) continue;
      out.push(info);
    }
    // A complete list names every container there is: forget the others.
    if (seen) {
      for (const id of this.summaries.keys()) if (!seen.has(id)) this.summaries.delete(id);
      for (const id of this.startFailures.keys()) if (!seen.has(id)) this.startFailures.delete(id);
      for (const id of this.known) if (!seen.has(id)) this.known.delete(id);
    }
    return out;
  }

  /** Notes a CRI container's full id (bounded: one forgotten only costs an inspect). */
  private remember(id: string): void {
    if (this.known.size >= MAX_KNOWN && !this.known.has(id)) this.known.clear();
    this.known.add(id);
  }

  /** Inspects each "created" container not judged yet (normally none: kubelet starts what it creates at once). */
  private async learnStartFailures(summaries: readonly ContainerSummary[]): Promise<void> {
    const unknown = summaries.filter((s) => s.State === "created" && !this.startFailures.has(s.Id));
    await Promise.all(
      unknown.map(async (s) => {
        const c = await this.docker.inspectContainer(s.Id).catch(() => undefined);
        // Gone meanwhile: nothing to learn. A verdict set meanwhile (own failed start) stands.
        if (c && !this.startFailures.has(s.Id)) this.startFailures.set(s.Id, startFailed(c.State));
      }),
    );
  }

  private summaryOf(s: ContainerSummary): ContainerSummaryInfo {
    const failed = s.State === "created" && this.startFailures.get(s.Id) === true;
    const key = `${s.State}\0${failed}\0${s.Names[0] ?? ""}\0${s.Image}\0${s.ImageID}\0${s.Created}`;
    const cached = this.summaries.get(s.Id);
    if (cached?.key === key) return cached.info;
    const info = summaryInfo(s, failed);
    Object.freeze(info.labels);
    Object.freeze(info.annotations);
    this.summaries.set(s.Id, { key, info: Object.freeze(info) });
    return info;
  }

  async updateResources(id: string, resources: ResourceSpec): Promise<void> {
    const c = await this.mustFind(id);
    await this.locks.run(c.Id, () => this.resizer.update(c, resources));
  }

  /** Kubelet renamed the log file; the next line goes to a new file at the same path. */
  async reopenLog(id: string): Promise<void> {
    const c = await this.mustFind(id);
    await this.locks.run(c.Id, async () => {
      if (!c.State.Running) throw failedPrecondition(`container ${id} is not running; its log cannot be reopened`);
      if (!(c.Config.Labels?.[LOG_PATH_LABEL] ?? "")) {
        throw failedPrecondition(`container ${id} has no log file (its sandbox or config gave no log path)`);
      }
      if (!(await this.options.logs.reopen(c.Id))) {
        throw failedPrecondition(`container ${id} has no running log writer (its output has ended)`);
      }
    });
  }

  /**
   * CheckpointContainer: the request is checked before the lookup (a bad
   * location is the caller's error whatever the container). Not under the
   * container's lock: a dump may take minutes, and a stop or removal meanwhile
   * is Docker's to order against it (the dump then fails and says so).
   */
  async checkpoint(id: string, location: string, timeoutSeconds: bigint, signal: AbortSignal): Promise<CheckpointResult> {
    const path = await checkedLocation(location);
    const deadlineMs = checkpointDeadlineMs(timeoutSeconds, this.options.requestTimeoutMs ?? 0);
    const c = await this.mustFind(id);
    // Its restore would need the pod's namespace and idmapped rootfs recreated around CRIU: not done.
    if (usernsFromLabels(c.Config.Labels)) throw failedPrecondition(`container ${id} runs in its pod's own user namespace, which cridock cannot checkpoint`);
    return this.checkpointer.checkpoint(c, path, deadlineMs, signal);
  }

  /** At startup: resume the log writers of containers whose output is not all copied yet. */
  resumeLogs(): Promise<number> {
    return this.options.logs.resumeAll();
  }

  private async mustFind(id: string, options: InspectOptions = {}): Promise<ContainerInspect> {
    const found = await this.find(id, options);
    if (!found) throw notFound(`container ${id} does not exist`);
    return found;
  }

  /** The container with this id or unique id prefix (not a sandbox); undefined if none. */
  private async find(id: string, options: InspectOptions = {}): Promise<ContainerInspect | undefined> {
    const fullId = await this.fullIdOf(id);
    return fullId ? this.inspectOwn(fullId, options) : undefined;
  }

  /** The full id `id` names: itself when it is one, else the container's whose id it prefixes (undefined if none). */
  private async fullIdOf(id: string): Promise<string | undefined> {
    validateId(id, "container");
    if (FULL_ID.test(id)) return id;
    return (await findByIdOrPrefix(this.docker, TYPE_CONTAINER, id, "container"))?.Id;
  }

  /** Docker's inspect of a CRI container (not a sandbox); undefined if there is none with this full id. */
  private async inspectOwn(fullId: string, options: InspectOptions = {}): Promise<ContainerInspect | undefined> {
    try {
      const c = await (options.cached ? this.docker.inspectContainerCached(fullId) : this.docker.inspectContainer(fullId));
      return c.Config.Labels?.[TYPE_LABEL] === TYPE_CONTAINER ? c : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}
