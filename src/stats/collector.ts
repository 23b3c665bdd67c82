/**
 * Turns kernel counters into usage figures for containers and pods: cgroup
 * samples, a CPU rate from the previous sample of the same process, the
 * writable layer's disk usage and the pod's network counters.
 */
import { CgroupReader, type CgroupSample } from "./cgroups.ts";
import type { CgroupPressure } from "./pressure.ts";
import { DiskUsageCache, type DiskUsage } from "./disk-usage.ts";
import { readNetDev, type InterfaceCounters } from "./netdev.ts";

export interface StatsTarget {
  /** Docker container id. */
  id: string;
  /** Host pid of the container's init process; 0 when it is not running. */
  pid: number;
  /** Overlay upper directory (the writable layer), when known. */
  upperDir?: string;
  /** The writable layer's size as Docker reported it, used when no upper directory is known. */
  fixedLayer?: DiskUsage;
}

export interface ContainerUsage {
  /** ns since the epoch. */
  timestamp: bigint;
  /** undefined when the container is not running (no cgroup to read). */
  cgroup: CgroupSample | undefined;
  /** CPU use over the interval since the previous sample, in nanocores. */
  usageNanoCores: bigint | undefined;
  writableLayer: DiskUsage | undefined;
}

export interface PodNetworkUsage {
  timestamp: bigint;
  interfaces: InterfaceCounters[];
}

interface CpuPoint {
  pid: number;
  usage: bigint;
  at: bigint;
}

/** Samples closer together than this give a rate too noisy to report. */
const MIN_RATE_INTERVAL_NS = 100_000_000n;

export function nanoNow(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

/** CPU rate in nanocores between two cumulative samples, or undefined if it cannot be known. */
export function cpuRate(previous: CpuPoint | undefined, current: CpuPoint): bigint | undefined {
  if (!previous || previous.pid !== current.pid) return undefined;
  const elapsed = current.at - previous.at;
  if (elapsed < MIN_RATE_INTERVAL_NS || current.usage < previous.usage) return undefined;
  return ((current.usage - previous.usage) * 1_000_000_000n) / elapsed;
}

export class StatsCollector {
  /** Per container: the last point a rate was taken at, and that rate. */
  private readonly lastCpu = new Map<string, { point: CpuPoint; rate: bigint | undefined }>();

  constructor(
    private readonly cgroups = new CgroupReader(),
    private readonly disk = new DiskUsageCache(),
  ) {}

  async container(target: StatsTarget): Promise<ContainerUsage> {
    const timestamp = nanoNow();
    const [cgroup, writableLayer] = await Promise.all([
      target.pid > 0 ? this.cgroups.sample(target.pid).catch(() => undefined) : undefined,
      target.upperDir ? this.disk.get(target.upperDir).catch(() => undefined) : target.fixedLayer,
    ]);
    let usageNanoCores: bigint | undefined;
    if (cgroup) {
      const point = { pid: target.pid, usage: cgroup.cpuUsageNanos, at: timestamp };
      const previous = this.lastCpu.get(target.id);
      if (!previous || previous.point.pid !== point.pid || point.at - previous.point.at >= MIN_RATE_INTERVAL_NS) {
        usageNanoCores = cpuRate(previous?.point, point);
        this.lastCpu.set(target.id, { point, rate: usageNanoCores });
      } else {
        // Asked again right after (kubelet's ListContainerStats, then its
        // ListPodSandboxStats): the rate of the window that just ended,
        // rather than none, which left the pod without a CPU rate.
        usageNanoCores = previous.rate;
      }
    }
    return { timestamp, cgroup, usageNanoCores, writableLayer };
  }

  /** The writable layer's last measurement (scheduling a refresh when stale). */
  layerUsage(upperDir: string): Promise<DiskUsage | undefined> {
    return this.disk.get(upperDir).catch(() => undefined);
  }

  /** The pressure of a pod's own cgroup, found from its pause process (CgroupReader.parentPressure). */
  async podPressure(pausePid: number): Promise<CgroupPressure | undefined> {
    if (pausePid <= 0) return undefined;
    return this.cgroups.parentPressure(pausePid).catch(() => undefined);
  }

  /** The memory limit of a pod's own cgroup, found from its pause process (CgroupReader.parentMemoryLimit). */
  async podMemoryLimit(pausePid: number): Promise<bigint | undefined> {
    if (pausePid <= 0) return undefined;
    return this.cgroups.parentMemoryLimit(pausePid).catch(() => undefined);
  }

  async podNetwork(pausePid: number): Promise<PodNetworkUsage | undefined> {
    if (pausePid <= 0) return undefined;
    const interfaces = await readNetDev(pausePid).catch(() => undefined);
    return interfaces && { timestamp: nanoNow(), interfaces };
  }

  /** Forgets containers that no longer exist. */
  retain(ids: Set<string>, upperDirs: Set<string>): void {
    for (const id of this.lastCpu.keys()) if (!ids.has(id)) this.lastCpu.delete(id);
    this.disk.retain(upperDirs);
  }
}
