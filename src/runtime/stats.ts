/**
 * Container and pod stats. One `GET /containers/json` per call finds the
 * containers; each container is inspected once (for its pid and writable
 * layer directory) and then read from the kernel. dockerd's stats endpoint is
 * never called, so stats scrapes cost dockerd one list call, however many
 * containers the node runs.
 *
 * The writable layer's directory comes from GraphDriver.Data.UpperDir on
 * Docker's classic image store; on the containerd image store Docker gives
 * none, so it is read from the running container's root mount and kept for
 * when the container has stopped (the snapshot stays until removal). A
 * container never seen running by this cridock has its size from Docker
 * (SizeRw, asked once per state: a stopped layer does not change), without
 * an inode count.
 */
import type { DockerClient } from "../docker/client.ts";
import type { ContainerSummary } from "../docker/types.ts";
import { notFound } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { CgroupSample } from "../stats/cgroups.ts";
import type { FilesystemUsage } from "./image/imagefs.ts";
import { type ContainerUsage, type PodNetworkUsage, StatsCollector, nanoNow } from "../stats/collector.ts";
import { fromDockerLabels, matchesSelector, SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL, TYPE_SANDBOX } from "./labels.ts";
import { findByIdOrPrefix, validateId } from "./lookup.ts";
import { parseName } from "./naming.ts";
import { dockerTimeToNanos } from "./sandbox/record.ts";
import { processUpperDir } from "../stats/overlay-root.ts";
import type { DiskUsage } from "../stats/disk-usage.ts";

export interface StatsFilter {
  id?: string;
  podSandboxId?: string;
  labelSelector?: Record<string, string>;
}

export interface ContainerStatsView {
  id: string;
  sandboxId: string;
  metadata: { name: string; attempt: number };
  labels: Record<string, string>;
  annotations: Record<string, string>;
  usage: ContainerUsage;
  /** Filesystem the writable layer lives on (Docker's root directory). */
  layerMountpoint: string;
  /** What the metrics RPCs label series with (cAdvisor's name, image) and read the cgroup through. */
  process: ProcessIdentity;
}

export interface ProcessIdentity {
  /** Docker's container name, without the leading slash. */
  dockerName: string;
  image: string;
  /** Host pid of the init process; 0 when not running. */
  pid: number;
  /** ns since the epoch; 0 when never started. */
  startedAt: bigint;
}

export interface PodStatsView {
  id: string;
  metadata: { name: string; namespace: string; uid: string; attempt: number };
  labels: Record<string, string>;
  annotations: Record<string, string>;
  timestamp: bigint;
  /** Pause container plus workload containers, summed; undefined when nothing runs. */
  cgroup: CgroupSample | undefined;
  usageNanoCores: bigint | undefined;
  network: PodNetworkUsage | undefined;
  containers: ContainerStatsView[];
  /** The pause container on its own (the pod-level series of the metrics RPCs). */
  pause: { process: ProcessIdentity; usage: ContainerUsage };
}

interface ProcessInfo {
  /** The cridock type of the container (sandbox or container): each list forgets only its own. */
  type: string;
  state: string;
  pid: number;
  /** HostConfig.CgroupParent: for a sandbox, the pod's cgroup kubelet made ("" when none). */
  cgroupParent: string;
  upperDir: string | undefined;
  startedAt: bigint;
  /** Docker's SizeRw, when no upper directory is known. */
  sizeRw?: DiskUsage;
}

function identity(summary: ContainerSummary, info: ProcessInfo): ProcessIdentity {
  return { dockerName: (summary.Names[0] ?? "").replace(/^\//, ""), image: summary.Image, pid: info.pid, startedAt: info.startedAt };
}

export class StatsService {
  private readonly processes = new Map<string, ProcessInfo>();
  private dockerRoot: string | undefined;

  constructor(
    private readonly docker: DockerClient,
    private readonly collector: StatsCollector,
    private readonly log: Logger,
  ) {}

  async containerStats(id: string): Promise<ContainerStatsView> {
    const found = await findByIdOrPrefix(this.docker, TYPE_CONTAINER, id, "container");
    if (!found) throw notFound(`container ${id} not found`);
    return this.containerView(found);
  }

  async listContainerStats(filter: StatsFilter = {}): Promise<ContainerStatsView[]> {
    if (filter.id) validateId(filter.id, "container");
    if (filter.podSandboxId) validateId(filter.podSandboxId, "sandbox");
    const all = await this.list(TYPE_CONTAINER);
    const wanted = all.filter((c) => {
      const labels = c.Labels ?? {};
      if (filter.id && !c.Id.startsWith(filter.id)) return false;
      if (filter.podSandboxId && !(labels[SANDBOX_ID_LABEL] ?? "").startsWith(filter.podSandboxId)) return false;
      return matchesSelector(fromDockerLabels(labels, false).labels, filter.labelSelector);
    });
    const views = await Promise.all(wanted.map((c) => this.containerView(c)));
    if (!filter.id && !filter.podSandboxId && !filter.labelSelector) this.forgetMissing(TYPE_CONTAINER, all);
    return views;
  }

  async podStats(id: string): Promise<PodStatsView> {
    const sandbox = await findByIdOrPrefix(this.docker, TYPE_SANDBOX, id, "sandbox");
    if (!sandbox) throw notFound(`pod sandbox ${id} not found`);
    const containers = await this.list(TYPE_CONTAINER);
    return this.podView(sandbox, containers);
  }

  async listPodStats(filter: { id?: string; labelSelector?: Record<string, string> } = {}): Promise<PodStatsView[]> {
    if (filter.id) validateId(filter.id, "sandbox");
    const [sandboxes, containers] = await Promise.all([this.list(TYPE_SANDBOX), this.list(TYPE_CONTAINER)]);
    const wanted = sandboxes.filter(
      (s) =>
        (!filter.id || s.Id.startsWith(filter.id)) &&
        matchesSelector(fromDockerLabels(s.Labels, true).labels, filter.labelSelector),
    );
    const views = await Promise.all(wanted.map((s) => this.podView(s, containers)));
    if (!filter.id && !filter.labelSelector) this.forgetMissing(TYPE_SANDBOX, sandboxes);
    return views;
  }

  private list(type: typeof TYPE_CONTAINER | typeof TYPE_SANDBOX): Promise<ContainerSummary[]> {
    return this.docker.listContainers({ label: [`${TYPE_LABEL}=${type}`] });
  }

  private async containerView(summary: ContainerSummary): Promise<ContainerStatsView> {
    const info = await this.processInfo(summary);
    const usage = await this.collector.container({ id: summary.Id, pid: info.pid, upperDir: info.upperDir, fixedLayer: info.sizeRw });
    const split = fromDockerLabels(summary.Labels, false);
    const parsed = parseName(summary.Names[0] ?? "");
    this.dockerRoot ??= (await this.docker.info()).DockerRootDir;
    return {
      id: summary.Id,
      sandboxId: split.internal[SANDBOX_ID_LABEL] ?? "",
      metadata: { name: parsed?.containerName ?? "", attempt: parsed?.attempt ?? 0 },
      labels: split.labels,
      annotations: split.annotations,
      usage,
      layerMountpoint: this.dockerRoot,
      process: identity(summary, info),
    };
  }

  private async podView(sandbox: ContainerSummary, all: ContainerSummary[]): Promise<PodStatsView> {
    const members = all.filter((c) => c.Labels?.[SANDBOX_ID_LABEL] === sandbox.Id);
    const pauseInfo = await this.processInfo(sandbox);
    const [pause, containers, network, pressure, podLimit] = await Promise.all([
      this.collector.container({ id: sandbox.Id, pid: pauseInfo.pid }),
      Promise.all(members.map((c) => this.containerView(c))),
      this.collector.podNetwork(pauseInfo.pid),
      // Only a pod with a cgroup of its own (kubelet's cgroup parent) has a
      // pressure and a limit of its own; under Docker's default parent they
      // would be all of Docker's.
      pauseInfo.cgroupParent ? this.collector.podPressure(pauseInfo.pid) : undefined,
      pauseInfo.cgroupParent ? this.collector.podMemoryLimit(pauseInfo.pid) : undefined,
    ]);
    const usages = [pause, ...containers.map((c) => c.usage)];
    const parsed = parseName(sandbox.Names[0] ?? "");
    const split = fromDockerLabels(sandbox.Labels, true);
    const running = usages.filter((u) => u.cgroup);
    return {
      id: sandbox.Id,
      metadata: {
        name: parsed?.pod.name ?? "",
        namespace: parsed?.pod.namespace ?? "",
        uid: parsed?.pod.uid ?? "",
        attempt: parsed?.attempt ?? 0,
      },
      labels: split.labels,
      annotations: split.annotations,
      timestamp: nanoNow(),
      cgroup: running.length > 0 ? podSample(sumSamples(running.map((u) => u.cgroup!)), pressure, podLimit) : undefined,
      usageNanoCores: running.length > 0 && running.every((u) => u.usageNanoCores !== undefined)
        ? running.reduce((sum, u) => sum + u.usageNanoCores!, 0n)
        : undefined,
      network,
      containers,
      pause: { process: identity(sandbox, pauseInfo), usage: pause },
    };
  }

  /** pid and writable layer of a container, inspected once per state it is seen in. */
  private async processInfo(summary: ContainerSummary): Promise<ProcessInfo> {
    const cached = this.processes.get(summary.Id);
    if (cached && cached.state === summary.State) return cached;
    try {
      const inspect = await this.docker.inspectContainer(summary.Id);
      const pid = inspect.State.Running ? inspect.State.Pid : 0;
      const upperDir = inspect.GraphDriver?.Data?.UpperDir || (await processUpperDir(pid)) || cached?.upperDir;
      const info: ProcessInfo = {
        type: summary.Labels?.[TYPE_LABEL] ?? "",
        state: summary.State,
        pid,
        cgroupParent: inspect.HostConfig?.CgroupParent ?? "",
        upperDir,
        startedAt: dockerTimeToNanos(inspect.State.StartedAt),
      };
      if (!upperDir && summary.Labels?.[TYPE_LABEL] === TYPE_CONTAINER) {
        const sized = await this.docker.inspectContainer(summary.Id, true);
        if (typeof sized.SizeRw === "number") {
          info.sizeRw = { bytes: BigInt(sized.SizeRw), inodes: undefined, measuredAt: nanoNow(), walkMs: 0 };
        }
      }
      this.processes.set(summary.Id, info);
      return info;
    } catch (err) {
      this.log.debug({ err, container: summary.Id }, "container vanished while collecting stats");
      return { type: summary.Labels?.[TYPE_LABEL] ?? "", state: summary.State, pid: 0, cgroupParent: "", upperDir: undefined, startedAt: 0n };
    }
  }

  /**
   * Forgets what was kept of the containers of `type` that an unfiltered
   * list no longer shows. Only of that type: the container list does not
   * show sandboxes, and forgetting their pause containers there made every
   * pod's next stats inspect its pause container again and lose its CPU
   * sample, so the pod had no CPU usage in the next ListPodSandboxStats.
   */
  private forgetMissing(type: string, present: ContainerSummary[]): void {
    const ids = new Set(present.map((c) => c.Id));
    for (const [id, info] of this.processes) if (info.type === type && !ids.has(id)) this.processes.delete(id);
    const kept = new Set(this.processes.keys());
    const dirs = new Set([...this.processes.values()].map((p) => p.upperDir).filter((d): d is string => !!d));
    this.collector.retain(kept, dirs);
  }

  /**
   * Writable layers of all CRI containers, summed into one filesystem entry
   * (ImageFsInfo.container_filesystems); none until a layer has been measured.
   */
  async writableLayers(): Promise<FilesystemUsage[]> {
    const containers = await this.list(TYPE_CONTAINER);
    const infos = await Promise.all(containers.map((c) => this.processInfo(c)));
    const dirs = infos.map((i) => i.upperDir).filter((d): d is string => !!d);
    const walked = await Promise.all(dirs.map((d) => this.collector.layerUsage(d)));
    const layers = [...walked, ...infos.map((i) => i.sizeRw)].filter((l) => l !== undefined);
    if (layers.length === 0) return [];
    this.dockerRoot ??= (await this.docker.info()).DockerRootDir;
    return [
      {
        timestamp: nanoNow(),
        mountpoint: this.dockerRoot,
        usedBytes: layers.reduce((sum, l) => sum + l.bytes, 0n),
        // Layers known only by Docker's SizeRw add no inodes.
        inodesUsed: layers.reduce((sum, l) => sum + (l.inodes ?? 0n), 0n),
      },
    ];
  }
}

/**
 * A pod's sample: its members' sum, with the pressure of its own cgroup and
 * the limit kubelet put on that cgroup (the one in force; the members' sum
 * has none, as the pause container has no limit), so that the pod's
 * available memory is known, as kubelet's Summary API reports it.
 */
function podSample(sum: CgroupSample, pressure: CgroupSample["pressure"], limit: bigint | undefined): CgroupSample {
  return { ...sum, pressure, limitBytes: limit ?? sum.limitBytes };
}

/**
 * Adds cgroup samples of a pod's containers; a limit is kept only if every
 * member has one. Pressure is a share of stalled time, which does not add up
 * across cgroups: a pod's is read from its own cgroup (podView).
 */
export function sumSamples(samples: CgroupSample[]): CgroupSample {
  const sum = (pick: (s: CgroupSample) => bigint) => samples.reduce((total, s) => total + pick(s), 0n);
  return {
    cpuUsageNanos: sum((s) => s.cpuUsageNanos),
    memoryUsageBytes: sum((s) => s.memoryUsageBytes),
    workingSetBytes: sum((s) => s.workingSetBytes),
    rssBytes: sum((s) => s.rssBytes),
    pageFaults: sum((s) => s.pageFaults),
    majorPageFaults: sum((s) => s.majorPageFaults),
    limitBytes: samples.every((s) => s.limitBytes !== undefined) ? sum((s) => s.limitBytes!) : undefined,
    processes: samples.every((s) => s.processes !== undefined) ? sum((s) => s.processes!) : undefined,
    pressure: undefined,
  };
}
