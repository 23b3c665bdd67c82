/**
 * The CRI metrics (ListMetricDescriptors, ListPodSandboxMetrics) in
 * cAdvisor's vocabulary: the names, help texts, types and labels kubelet's
 * /metrics/cadvisor serves when it reads cAdvisor itself, so dashboards and
 * alerts keep working when kubelet takes them from the runtime
 * (PodAndContainerStatsFromCRI). kubelet turns each descriptor into a
 * Prometheus family once, at start, and each metric into a sample with the
 * descriptor's label keys, so the set below is fixed and every series of a
 * family carries exactly its label values.
 *
 * Label keys are those kubelet gives cAdvisor series: container, id (the
 * cgroup path), image, name (Docker's container name), namespace and pod,
 * plus cAdvisor's own extra labels where the family has them (cpu, device,
 * interface, failure_type/scope; device/major/minor/operation for blkio). The pause container is reported as
 * container "POD", as cAdvisor did on Docker nodes; pod network counters
 * belong to it.
 *
 * CRI carries values as uint64: "_seconds" families are whole seconds
 * (truncated), as in CRI-O. Pure functions: runtime/pod-metrics.ts gathers
 * the inputs.
 */
import type { CgroupDetail } from "../stats/cgroup-detail.ts";
import type { CgroupLimits } from "../stats/cgroup-limits.ts";
import type { CgroupSample } from "../stats/cgroups.ts";
import type { InterfaceCounters } from "../stats/netdev.ts";
import type { DescriptorCounts } from "../stats/process-files.ts";

export const BASE_LABEL_KEYS = ["container", "id", "image", "name", "namespace", "pod"] as const;

export type MetricKind = "counter" | "gauge";

export interface MetricDescriptorData {
  name: string;
  help: string;
  labelKeys: string[];
}

export interface MetricData {
  name: string;
  /** ns since the epoch of the sample. */
  timestamp: bigint;
  kind: MetricKind;
  labelValues: string[];
  value: bigint;
}

export interface SeriesLabels {
  container: string;
  id: string;
  image: string;
  name: string;
  namespace: string;
  pod: string;
}

/** One cAdvisor "container" (a CRI container or the pause container) and what was read for it. */
export interface SeriesSource {
  labels: SeriesLabels;
  timestamp: bigint;
  /** ns since the epoch; 0 when unknown. */
  startedAt: bigint;
  cgroup?: CgroupSample;
  detail?: CgroupDetail;
  limits?: CgroupLimits;
  /** Block I/O with device names resolved ("/dev/sda"); `number` is the device's "major:minor". */
  blockIo?: {
    device: string;
    number: string;
    readBytes: bigint;
    writeBytes: bigint;
    reads: bigint;
    writes: bigint;
    serviceBytes: { op: string; value: bigint }[];
  }[];
  /** Open descriptors and sockets of the cgroup's processes. */
  descriptors?: DescriptorCounts;
  /** The writable layer and the filesystem it is on. */
  fs?: { device: string; usageBytes: bigint; limitBytes: bigint; inodesTotal: bigint; inodesFree: bigint };
  network?: InterfaceCounters[];
}

interface Value {
  extra?: string[];
  value: bigint | undefined;
}

interface Family {
  name: string;
  help: string;
  kind: MetricKind;
  extraKeys?: string[];
  values: (s: SeriesSource) => Value[];
}

const NS_PER_S = 1_000_000_000n;
const seconds = (ns: bigint | undefined) => (ns === undefined ? undefined : ns / NS_PER_S);
const one = (value: bigint | undefined): Value[] => [{ value }];
const perInterface = (pick: (i: InterfaceCounters) => bigint) => (s: SeriesSource) =>
  (s.network ?? []).map((i) => ({ extra: [i.name], value: pick(i) }));
const perDevice = (pick: (d: NonNullable<SeriesSource["blockIo"]>[number]) => bigint) => (s: SeriesSource) =>
  (s.blockIo ?? []).map((d) => ({ extra: [d.device], value: pick(d) }));
/** cAdvisor's blkio device usage: bytes per device and operation, the device's numbers as labels. */
const deviceUsage = (s: SeriesSource): Value[] =>
  (s.blockIo ?? []).flatMap((d) => {
    const [major = "", minor = ""] = d.number.split(":");
    return d.serviceBytes.map((b) => ({ extra: [d.device, major, minor, b.op], value: b.value }));
  });
/** cAdvisor counts the processes of cgroup.procs; the pids controller's count (threads) when that list is unknown. */
const processCount = (s: SeriesSource): bigint | undefined =>
  s.detail?.procs.length ? BigInt(s.detail.procs.length) : s.cgroup?.processes;
const fs = (pick: (f: NonNullable<SeriesSource["fs"]>) => bigint) => (s: SeriesSource) => (s.fs ? [{ extra: [s.fs.device], value: pick(s.fs) }] : []);

const FAMILIES: Family[] = [
  { name: "container_last_seen", help: "Last time a container was seen by the exporter", kind: "gauge", values: (s) => one(s.timestamp / NS_PER_S) },
  {
    name: "container_start_time_seconds",
    help: "Start time of the container since unix epoch in seconds.",
    kind: "gauge",
    values: (s) => one(s.startedAt > 0n ? s.startedAt / NS_PER_S : undefined),
  },
  { name: "container_cpu_user_seconds_total", help: "Cumulative user cpu time consumed in seconds.", kind: "counter", values: (s) => one(seconds(s.detail?.cpuUserNanos)) },
  { name: "container_cpu_system_seconds_total", help: "Cumulative system cpu time consumed in seconds.", kind: "counter", values: (s) => one(seconds(s.detail?.cpuSystemNanos)) },
  {
    name: "container_cpu_usage_seconds_total",
    help: "Cumulative cpu time consumed in seconds.",
    kind: "counter",
    extraKeys: ["cpu"],
    values: (s) => [{ extra: ["total"], value: seconds(s.cgroup?.cpuUsageNanos) }],
  },
  { name: "container_cpu_cfs_periods_total", help: "Number of elapsed enforcement period intervals.", kind: "counter", values: (s) => one(s.limits?.cpuQuota ? s.detail?.cfsPeriods : undefined) },
  { name: "container_cpu_cfs_throttled_periods_total", help: "Number of throttled period intervals.", kind: "counter", values: (s) => one(s.limits?.cpuQuota ? s.detail?.cfsThrottledPeriods : undefined) },
  {
    name: "container_cpu_cfs_throttled_seconds_total",
    help: "Total time duration the container has been throttled.",
    kind: "counter",
    values: (s) => one(s.limits?.cpuQuota ? seconds(s.detail?.cfsThrottledNanos) : undefined),
  },
  { name: "container_memory_cache", help: "Number of bytes of page cache memory.", kind: "gauge", values: (s) => one(s.detail?.memoryCache) },
  { name: "container_memory_rss", help: "Size of RSS in bytes.", kind: "gauge", values: (s) => one(s.cgroup?.rssBytes) },
  { name: "container_memory_mapped_file", help: "Size of memory mapped files in bytes.", kind: "gauge", values: (s) => one(s.detail?.memoryMappedFile) },
  { name: "container_memory_swap", help: "Container swap usage in bytes.", kind: "gauge", values: (s) => one(s.detail?.memorySwap) },
  { name: "container_memory_kernel_usage", help: "Size of kernel memory allocated in bytes.", kind: "gauge", values: (s) => one(s.detail?.memoryKernelUsage) },
  { name: "container_memory_failcnt", help: "Number of memory usage hits limits", kind: "counter", values: (s) => one(s.detail?.memoryFailcnt) },
  {
    name: "container_memory_usage_bytes",
    help: "Current memory usage in bytes, including all memory regardless of when it was accessed",
    kind: "gauge",
    values: (s) => one(s.cgroup?.memoryUsageBytes),
  },
  { name: "container_memory_max_usage_bytes", help: "Maximum memory usage recorded in bytes", kind: "gauge", values: (s) => one(s.detail?.memoryMaxUsage) },
  { name: "container_memory_working_set_bytes", help: "Current working set in bytes.", kind: "gauge", values: (s) => one(s.cgroup?.workingSetBytes) },
  {
    name: "container_memory_failures_total",
    help: "Cumulative count of memory allocation failures.",
    kind: "counter",
    extraKeys: ["failure_type", "scope"],
    values: (s) => [
      { extra: ["pgfault", "hierarchy"], value: s.cgroup?.pageFaults },
      { extra: ["pgmajfault", "hierarchy"], value: s.cgroup?.majorPageFaults },
    ],
  },
  { name: "container_oom_events_total", help: "Count of out of memory events observed for the container", kind: "counter", values: (s) => one(s.detail?.oomKills) },
  { name: "container_processes", help: "Number of processes running inside the container.", kind: "gauge", values: (s) => one(processCount(s)) },
  { name: "container_file_descriptors", help: "Number of open file descriptors for the container.", kind: "gauge", values: (s) => one(s.descriptors?.fds) },
  { name: "container_sockets", help: "Number of open sockets for the container.", kind: "gauge", values: (s) => one(s.descriptors?.sockets) },
  { name: "container_threads", help: "Number of threads running inside the container", kind: "gauge", values: (s) => one(s.detail?.threads) },
  {
    name: "container_threads_max",
    help: "Maximum number of threads allowed inside the container, infinity if value is zero",
    kind: "gauge",
    values: (s) => one(s.detail?.threadsMax),
  },
  { name: "container_spec_cpu_period", help: "CPU period of the container.", kind: "gauge", values: (s) => one(s.limits?.cpuQuota ? s.limits.cpuPeriod : undefined) },
  { name: "container_spec_cpu_quota", help: "CPU quota of the container.", kind: "gauge", values: (s) => one(s.limits?.cpuQuota || undefined) },
  { name: "container_spec_cpu_shares", help: "CPU share of the container.", kind: "gauge", values: (s) => one(s.limits?.cpuShares) },
  { name: "container_spec_memory_limit_bytes", help: "Memory limit for the container.", kind: "gauge", values: (s) => one(s.limits ? s.limits.memoryLimit : undefined) },
  { name: "container_spec_memory_swap_limit_bytes", help: "Memory swap limit for the container.", kind: "gauge", values: (s) => one(s.detail?.memorySwapLimit) },
  { name: "container_fs_usage_bytes", help: "Number of bytes that are consumed by the container on this filesystem.", kind: "gauge", extraKeys: ["device"], values: fs((f) => f.usageBytes) },
  { name: "container_fs_limit_bytes", help: "Number of bytes that can be consumed by the container on this filesystem.", kind: "gauge", extraKeys: ["device"], values: fs((f) => f.limitBytes) },
  { name: "container_fs_inodes_total", help: "Number of Inodes", kind: "gauge", extraKeys: ["device"], values: fs((f) => f.inodesTotal) },
  { name: "container_fs_inodes_free", help: "Number of available Inodes", kind: "gauge", extraKeys: ["device"], values: fs((f) => f.inodesFree) },
  { name: "container_fs_reads_bytes_total", help: "Cumulative count of bytes read", kind: "counter", extraKeys: ["device"], values: perDevice((d) => d.readBytes) },
  { name: "container_fs_reads_total", help: "Cumulative count of reads completed", kind: "counter", extraKeys: ["device"], values: perDevice((d) => d.reads) },
  { name: "container_fs_writes_bytes_total", help: "Cumulative count of bytes written", kind: "counter", extraKeys: ["device"], values: perDevice((d) => d.writeBytes) },
  { name: "container_fs_writes_total", help: "Cumulative count of writes completed", kind: "counter", extraKeys: ["device"], values: perDevice((d) => d.writes) },
  { name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage", kind: "counter", extraKeys: ["device", "major", "minor", "operation"], values: deviceUsage },
  { name: "container_network_receive_bytes_total", help: "Cumulative count of bytes received", kind: "counter", extraKeys: ["interface"], values: perInterface((i) => i.rxBytes) },
  { name: "container_network_receive_packets_total", help: "Cumulative count of packets received", kind: "counter", extraKeys: ["interface"], values: perInterface((i) => i.rxPackets) },
  {
    name: "container_network_receive_packets_dropped_total",
    help: "Cumulative count of packets dropped while receiving",
    kind: "counter",
    extraKeys: ["interface"],
    values: perInterface((i) => i.rxDropped),
  },
  {
    name: "container_network_receive_errors_total",
    help: "Cumulative count of errors encountered while receiving",
    kind: "counter",
    extraKeys: ["interface"],
    values: perInterface((i) => i.rxErrors),
  },
  { name: "container_network_transmit_bytes_total", help: "Cumulative count of bytes transmitted", kind: "counter", extraKeys: ["interface"], values: perInterface((i) => i.txBytes) },
  { name: "container_network_transmit_packets_total", help: "Cumulative count of packets transmitted", kind: "counter", extraKeys: ["interface"], values: perInterface((i) => i.txPackets) },
  {
    name: "container_network_transmit_packets_dropped_total",
    help: "Cumulative count of packets dropped while transmitting",
    kind: "counter",
    extraKeys: ["interface"],
    values: perInterface((i) => i.txDropped),
  },
  {
    name: "container_network_transmit_errors_total",
    help: "Cumulative count of errors encountered while transmitting",
    kind: "counter",
    extraKeys: ["interface"],
    values: perInterface((i) => i.txErrors),
  },
];

/** The fixed descriptor set (ListMetricDescriptors). */
export function metricDescriptors(): MetricDescriptorData[] {
  return FAMILIES.map((f) => ({ name: f.name, help: f.help, labelKeys: [...BASE_LABEL_KEYS, ...(f.extraKeys ?? [])] }));
}

/** Every sample of one cAdvisor container; families without a reading are left out. */
export function seriesMetrics(s: SeriesSource): MetricData[] {
  const base = BASE_LABEL_KEYS.map((k) => s.labels[k]);
  const out: MetricData[] = [];
  for (const family of FAMILIES) {
    for (const v of family.values(s)) {
      if (v.value === undefined || v.value < 0n) continue;
      out.push({ name: family.name, timestamp: s.timestamp, kind: family.kind, labelValues: [...base, ...(v.extra ?? [])], value: v.value });
    }
  }
  return out;
}
