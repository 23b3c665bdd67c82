/**
 * ListPodSandboxMetrics: the pod views of the stats RPCs (same list call,
 * same cgroup and netns collector, runtime/stats.ts), plus the cgroup detail
 * and limits only metrics need, turned into cAdvisor series
 * (cadvisor-metrics.ts). One series per running container and one for the
 * pause container (container "POD", with the pod's network counters).
 * Containers that are not running have no cgroup and, as in cAdvisor, no
 * series.
 *
 * Cost: per running container, the cgroup files of the stats RPCs plus a
 * dozen more, and a walk of its processes' /proc/<pid>/fd (one listing per
 * process, one readlink per descriptor: process-files.ts). The walk is kept
 * for DESCRIPTORS_TTL_MS per container, so a scraper that asks more often
 * than that costs no more walks; nothing is read between calls.
 */
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { seriesMetrics, type MetricData, type SeriesSource } from "./cadvisor-metrics.ts";
import { blockDeviceName, readCgroupDetail } from "../stats/cgroup-detail.ts";
import { readCgroupLimits } from "../stats/cgroup-limits.ts";
import { CgroupReader } from "../stats/cgroups.ts";
import { filesystemOf, type FilesystemInfo } from "../stats/mount-device.ts";
import { countDescriptors, type DescriptorCounts } from "../stats/process-files.ts";
import type { ContainerUsage } from "../stats/collector.ts";
import type { ProcessIdentity, StatsService } from "./stats.ts";

export interface PodMetricsData {
  podSandboxId: string;
  metrics: MetricData[];
  containerMetrics: { containerId: string; metrics: MetricData[] }[];
}

/** The pause container's name label, as on Docker nodes under cAdvisor. */
export const POD_CONTAINER_NAME = "POD";
/** Filesystem figures change slowly; statfs at most this often. */
const FS_TTL_MS = 10_000;
/** Descriptor counts of one container (its cgroup) are walked at most this often. */
export const DESCRIPTORS_TTL_MS = 10_000;

export class PodMetricsService {
  private fs: { at: number; info: FilesystemInfo | undefined; root: string } | undefined;
  /** By cgroup path and the container's pid: a restarted container is walked afresh. */
  private descriptorCache = new Map<string, { at: number; counts: DescriptorCounts }>();

  constructor(
    private readonly stats: StatsService,
    private readonly docker: DockerClient,
    private readonly log: Logger,
    private readonly cgroups = new CgroupReader(),
    private readonly now: () => number = Date.now,
  ) {}

  async list(): Promise<PodMetricsData[]> {
    const pods = await this.stats.listPodStats();
    // Forget what has aged out (containers gone included), so the cache stays as small as the node.
    const now = this.now();
    for (const [key, entry] of this.descriptorCache) if (now - entry.at >= DESCRIPTORS_TTL_MS) this.descriptorCache.delete(key);
    const fsInfo = await this.filesystem();
    return Promise.all(
      pods.map(async (pod) => {
        const names = { namespace: pod.metadata.namespace, pod: pod.metadata.name };
        const pause = await this.source(POD_CONTAINER_NAME, names, pod.pause.process, pod.pause.usage, undefined);
        if (pause) pause.network = pod.network?.interfaces;
        const containers = await Promise.all(
          pod.containers.map(async (c) => ({
            containerId: c.id,
            source: await this.source(c.metadata.name, names, c.process, c.usage, fsInfo),
          })),
        );
        return {
          podSandboxId: pod.id,
          metrics: pause ? seriesMetrics(pause) : [],
          containerMetrics: containers.filter((c) => c.source).map((c) => ({ containerId: c.containerId, metrics: seriesMetrics(c.source!) })),
        };
      }),
    );
  }

  private async source(
    container: string,
    names: { namespace: string; pod: string },
    process: ProcessIdentity,
    usage: ContainerUsage,
    fsInfo: FilesystemInfo | undefined,
  ): Promise<SeriesSource | undefined> {
    if (!usage.cgroup || process.pid <= 0) return undefined;
    const [paths, detail, limits] = await Promise.all([
      this.cgroups.cgroupPaths(process.pid).catch(() => undefined),
      readCgroupDetail(this.cgroups, process.pid),
      readCgroupLimits(this.cgroups, process.pid),
    ]);
    if (!paths) return undefined; // exited since the sample
    const version = await this.cgroups.cgroupVersion();
    const id = (version === 2 ? paths.get("") : (paths.get("cpu") ?? paths.get("memory"))) ?? "";
    const blockIo = await Promise.all(
      (detail?.blockIo ?? []).map(async (io) => ({ ...io, number: io.device, device: await blockDeviceName(io.device) })),
    );
    const layer = usage.writableLayer;
    return {
      labels: { container, id, image: process.image, name: process.dockerName, ...names },
      timestamp: usage.timestamp,
      startedAt: process.startedAt,
      cgroup: usage.cgroup,
      detail,
      limits,
      blockIo,
      descriptors: detail ? this.descriptors(`${id}#${process.pid}`, detail.procs) : undefined,
      fs:
        layer && fsInfo
          ? {
              device: fsInfo.device,
              usageBytes: layer.bytes,
              limitBytes: fsInfo.capacityBytes,
              inodesTotal: fsInfo.inodesTotal,
              inodesFree: fsInfo.inodesFree,
            }
          : undefined,
    };
  }

  /** Open descriptors and sockets of a cgroup's processes, walked at most once per DESCRIPTORS_TTL_MS. */
  private descriptors(key: string, procs: readonly number[]): DescriptorCounts | undefined {
    if (procs.length === 0) return undefined;
    const cached = this.descriptorCache.get(key);
    if (cached) return cached.counts;
    const counts = countDescriptors(procs, this.cgroups.proc);
    this.descriptorCache.set(key, { at: this.now(), counts });
    return counts;
  }

  /** Docker's root filesystem (where writable layers live), cached briefly. */
  private async filesystem(): Promise<FilesystemInfo | undefined> {
    if (this.fs && Date.now() - this.fs.at < FS_TTL_MS) return this.fs.info;
    let info: FilesystemInfo | undefined;
    let root = this.fs?.root ?? "";
    try {
      root ||= (await this.docker.info()).DockerRootDir;
      info = await filesystemOf(root);
    } catch (err) {
      this.log.debug({ err, root }, "cannot read the filesystem of Docker's root directory");
    }
    this.fs = { at: Date.now(), info, root };
    return info;
  }
}
