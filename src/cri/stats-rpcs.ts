/**
 * ContainerStats, ListContainerStats, PodSandboxStats, ListPodSandboxStats
 * and their streaming variants. The metrics RPCs (cAdvisor-named series
 * from the same collector) are in metrics-rpcs.ts.
 */
import type { HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import type { ContainerStatsView, PodStatsView, StatsService } from "../runtime/stats.ts";
import type { CgroupSample } from "../stats/cgroups.ts";
import type { Pressure, PressureLine } from "../stats/pressure.ts";
import { sendInBatches } from "./list-stream.ts";

export interface StatsDeps {
  stats: StatsService;
}

const u64 = (value: bigint | undefined): cri.UInt64Value | null => (value === undefined ? null : { value });

function psiData(line: PressureLine): cri.PsiData {
  return { Total: line.totalNanos, Avg10: line.avg10, Avg60: line.avg60, Avg300: line.avg300 };
}

/** CRI's PsiStats; the cpu file of older kernels has no "full" line, which stays unset. */
function psi(pressure: Pressure | undefined): cri.PsiStats | null {
  if (!pressure) return null;
  return { Some: psiData(pressure.some), Full: pressure.full ? psiData(pressure.full) : null };
}

function cpuUsage(timestamp: bigint, cgroup: CgroupSample | undefined, nanoCores: bigint | undefined): cri.CpuUsage | null {
  if (!cgroup) return null;
  return {
    timestamp,
    usageCoreNanoSeconds: u64(cgroup.cpuUsageNanos),
    usageNanoCores: u64(nanoCores),
    psi: psi(cgroup.pressure?.cpu),
  };
}

/** Only pressure is in CRI's IoUsage; none without it. */
function ioUsage(timestamp: bigint, cgroup: CgroupSample | undefined): cri.IoUsage | null {
  const io = cgroup?.pressure?.io;
  return io ? { timestamp, psi: psi(io) } : null;
}

function memoryUsage(timestamp: bigint, cgroup: CgroupSample | undefined): cri.MemoryUsage | null {
  if (!cgroup) return null;
  const available =
    cgroup.limitBytes === undefined
      ? undefined
      : cgroup.limitBytes > cgroup.workingSetBytes
        ? cgroup.limitBytes - cgroup.workingSetBytes
        : 0n;
  return {
    timestamp,
    workingSetBytes: u64(cgroup.workingSetBytes),
    availableBytes: u64(available),
    usageBytes: u64(cgroup.memoryUsageBytes),
    rssBytes: u64(cgroup.rssBytes),
    pageFaults: u64(cgroup.pageFaults),
    majorPageFaults: u64(cgroup.majorPageFaults),
    psi: psi(cgroup.pressure?.memory),
  };
}

export function toContainerStats(view: ContainerStatsView): cri.ContainerStats {
  const { usage } = view;
  const layer = usage.writableLayer;
  return {
    attributes: { id: view.id, metadata: view.metadata, labels: view.labels, annotations: view.annotations },
    cpu: cpuUsage(usage.timestamp, usage.cgroup, usage.usageNanoCores),
    memory: memoryUsage(usage.timestamp, usage.cgroup),
    io: ioUsage(usage.timestamp, usage.cgroup),
    writableLayer: layer
      ? {
          timestamp: layer.measuredAt,
          fsId: { mountpoint: view.layerMountpoint },
          usedBytes: u64(layer.bytes),
          inodesUsed: layer.inodes === undefined ? null : u64(layer.inodes),
        }
      : null,
  };
}

export function toPodSandboxStats(view: PodStatsView): cri.PodSandboxStats {
  const network = view.network;
  const interfaces = (network?.interfaces ?? []).map((i) => ({
    name: i.name,
    rxBytes: u64(i.rxBytes),
    rxErrors: u64(i.rxErrors),
    txBytes: u64(i.txBytes),
    txErrors: u64(i.txErrors),
  }));
  return {
    attributes: { id: view.id, metadata: view.metadata, labels: view.labels, annotations: view.annotations },
    linux: {
      cpu: cpuUsage(view.timestamp, view.cgroup, view.usageNanoCores),
      memory: memoryUsage(view.timestamp, view.cgroup),
      io: ioUsage(view.timestamp, view.cgroup),
      // kubelet (1.36, addCRIPodNetworkStats) reads default_interface without a
      // nil check and panics on a network that has none: a pod whose namespace
      // shows no interface yet (a sandbox being replaced) reports no network.
      network: network && interfaces.length > 0
        ? {
            timestamp: network.timestamp,
            defaultInterface: interfaces.find((i) => i.name === "eth0") ?? interfaces[0] ?? null,
            interfaces,
          }
        : null,
      process: view.cgroup?.processes !== undefined
        ? { timestamp: view.timestamp, processCount: u64(view.cgroup.processes) }
        : null,
      containers: view.containers.map(toContainerStats),
    },
  };
}

function containerFilter(filter: cri.ContainerStatsFilter | null | undefined) {
  return {
    id: filter?.id || undefined,
    podSandboxId: filter?.podSandboxId || undefined,
    labelSelector: filter?.labelSelector && Object.keys(filter.labelSelector).length > 0 ? filter.labelSelector : undefined,
  };
}

function podFilter(filter: cri.PodSandboxStatsFilter | null | undefined) {
  return {
    id: filter?.id || undefined,
    labelSelector: filter?.labelSelector && Object.keys(filter.labelSelector).length > 0 ? filter.labelSelector : undefined,
  };
}

export function statsRpcs({ stats }: StatsDeps): HandlerTable {
  return {
    async ContainerStats(request: cri.ContainerStatsRequest): Promise<cri.ContainerStatsResponse> {
      return { stats: toContainerStats(await stats.containerStats(request.containerId ?? "")) };
    },

    async ListContainerStats(request: cri.ListContainerStatsRequest): Promise<cri.ListContainerStatsResponse> {
      const views = await stats.listContainerStats(containerFilter(request.filter));
      return { stats: views.map(toContainerStats) };
    },

    async StreamContainerStats(request: cri.StreamContainerStatsRequest, _ctx, send) {
      const views = await stats.listContainerStats(containerFilter(request.filter));
      await sendInBatches(views.map(toContainerStats), (batch) => send({ containerStats: batch }));
    },

    async PodSandboxStats(request: cri.PodSandboxStatsRequest): Promise<cri.PodSandboxStatsResponse> {
      return { stats: toPodSandboxStats(await stats.podStats(request.podSandboxId ?? "")) };
    },

    async ListPodSandboxStats(request: cri.ListPodSandboxStatsRequest): Promise<cri.ListPodSandboxStatsResponse> {
      const views = await stats.listPodStats(podFilter(request.filter));
      return { stats: views.map(toPodSandboxStats) };
    },

    async StreamPodSandboxStats(request: cri.StreamPodSandboxStatsRequest, _ctx, send) {
      const views = await stats.listPodStats(podFilter(request.filter));
      await sendInBatches(views.map(toPodSandboxStats), (batch) => send({ podSandboxStats: batch }));
    },
  };
}
