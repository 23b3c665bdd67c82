/**
 * ListPodSandboxMetrics: the pod views of the stats RPCs (same list call,
 * same cgroup and netns collector, runtime/stats.ts), plus the cgroup detail
 * and limits only metrics need, turned into cAdvisor series
 * (cadvisor-metrics.ts). One series per running container and one for the
 * pause container (container "POD", with the pod's network counters).
 * Containers that are not running have no cgroup and, as in cAdvisor, no
 * series.
 */
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { seriesMetrics, type MetricData, type SeriesSource } from "./cadvisor-metrics.ts";
import { blockDeviceName, readCgroupDetail } from "../stats/cgroup-detail.ts";
import { readCgroupLimits } from "../stats/cgroup-limits.ts";
import { CgroupReader } from "../stats/cgroups.ts";
import { filesystemOf, type FilesystemInfo } from "../stats/mount-device.ts";
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

export class PodMetricsService {
  private fs: { at: number; info: FilesystemInfo | undefined; root: string } | undefined;

  constructor(
    private readonly stats: StatsService,
    private readonly docker: DockerClient,
    private readonly log: Logger,
    private readonly cgroups = new CgroupReader(),
  ) {}

  async list(): Promise<PodMetricsData[]> {
    const pods = await this.stats.listPodStats();
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
      (detail?.blockIo ?? []).map(async (io) => ({ ...io, device: await blockDeviceName(io.device) })),
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
