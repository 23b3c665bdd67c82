/**
 * The cAdvisor-named CRI metrics: the descriptor set kubelet registers once,
 * and the conversion of one container's readings into samples whose label
 * values line up with their descriptor's label keys (kubelet drops a sample
 * whose label count differs, and a duplicate series breaks the scrape).
 */
import t from "tap";
import { BASE_LABEL_KEYS, metricDescriptors, seriesMetrics, type SeriesSource } from "../../../src/runtime/cadvisor-metrics.ts";

const NS = 1_000_000_000n;

const source: SeriesSource = {
  labels: { container: "app", id: "/kubepods/besteffort/podu/abc", image: "busybox:latest", name: "k8s_app_web_default_u_0", namespace: "default", pod: "web" },
  timestamp: 1_700_000_000n * NS + 123n,
  startedAt: 1_699_999_000n * NS,
  cgroup: { cpuUsageNanos: 2_900_000_000n, memoryUsageBytes: 5000n, workingSetBytes: 4000n, rssBytes: 3000n, pageFaults: 70n, majorPageFaults: 2n, limitBytes: 8000n, processes: 3n, pressure: undefined },
  detail: {
    cpuUserNanos: 2_000_000_000n,
    cpuSystemNanos: 900_000_000n,
    cfsPeriods: 10n,
    cfsThrottledPeriods: 4n,
    cfsThrottledNanos: 3_500_000_000n,
    memoryCache: 1000n,
    memoryMappedFile: 10n,
    memorySwap: 0n,
    memoryFailcnt: 1n,
    memoryMaxUsage: 6000n,
    oomKills: 0n,
    memoryKernelUsage: 65536n,
    memorySwapLimit: 64n << 20n,
    threads: 7n,
    threadsMax: 1024n,
    procs: [101, 102],
    blockIo: [],
  },
  limits: { cpuShares: 512n, cpuQuota: 50000n, cpuPeriod: 100000n, memoryLimit: 8000n, cpusetCpus: "", cpusetMems: "", pidsLimit: 0n },
  blockIo: [
    {
      device: "/dev/sda",
      number: "8:0",
      readBytes: 4096n,
      writeBytes: 8192n,
      reads: 1n,
      writes: 2n,
      serviceBytes: [
        { op: "Read", value: 4096n },
        { op: "Write", value: 8192n },
        { op: "Total", value: 12288n },
      ],
    },
  ],
  descriptors: { fds: 12n, sockets: 3n },
  fs: { device: "/dev/sda1", usageBytes: 12288n, limitBytes: 1n << 30n, inodesTotal: 1000n, inodesFree: 900n },
  network: [
    { name: "eth0", rxBytes: 100n, rxPackets: 2n, rxErrors: 0n, rxDropped: 0n, txBytes: 200n, txPackets: 3n, txErrors: 0n, txDropped: 1n },
    { name: "eth1", rxBytes: 5n, rxPackets: 1n, rxErrors: 0n, rxDropped: 0n, txBytes: 6n, txPackets: 1n, txErrors: 0n, txDropped: 0n },
  ],
};

t.test("descriptors: cAdvisor's names, help and label keys, each once", async (t) => {
  const descriptors = metricDescriptors();
  const byName = new Map(descriptors.map((d) => [d.name, d]));
  t.equal(byName.size, descriptors.length, "names are unique");
  for (const d of descriptors) {
    t.ok(d.help.length > 0, `${d.name} has help`);
    t.same(d.labelKeys.slice(0, BASE_LABEL_KEYS.length), [...BASE_LABEL_KEYS], `${d.name} starts with the base label keys`);
  }
  t.same(BASE_LABEL_KEYS, ["container", "id", "image", "name", "namespace", "pod"]);
  t.equal(byName.get("container_cpu_usage_seconds_total")?.help, "Cumulative cpu time consumed in seconds.");
  t.same(byName.get("container_cpu_usage_seconds_total")?.labelKeys.slice(6), ["cpu"]);
  t.equal(byName.get("container_memory_working_set_bytes")?.help, "Current working set in bytes.");
  t.same(byName.get("container_network_receive_bytes_total")?.labelKeys.slice(6), ["interface"]);
  t.same(byName.get("container_fs_usage_bytes")?.labelKeys.slice(6), ["device"]);
  t.same(byName.get("container_memory_failures_total")?.labelKeys.slice(6), ["failure_type", "scope"]);
  for (const name of ["container_last_seen", "container_start_time_seconds", "container_spec_memory_limit_bytes", "container_oom_events_total", "container_processes"]) {
    t.ok(byName.has(name), name);
  }
});

t.test("samples: values in cAdvisor's units, label values aligned with the keys, no duplicate series", async (t) => {
  const keys = new Map(metricDescriptors().map((d) => [d.name, d.labelKeys]));
  const metrics = seriesMetrics(source);
  const seen = new Set<string>();
  for (const m of metrics) {
    t.equal(m.labelValues.length, keys.get(m.name)?.length, `${m.name} label count`);
    const key = `${m.name}{${m.labelValues.join(",")}}`;
    t.notOk(seen.has(key), `${key} appears once`);
    seen.add(key);
    t.equal(m.timestamp, source.timestamp);
  }
  const find = (name: string, ...extra: string[]) =>
    metrics.find((m) => m.name === name && m.labelValues.slice(6).join(",") === extra.join(","));
  t.same(find("container_cpu_usage_seconds_total", "total")?.labelValues.slice(0, 6), ["app", "/kubepods/besteffort/podu/abc", "busybox:latest", "k8s_app_web_default_u_0", "default", "web"]);
  t.equal(find("container_cpu_usage_seconds_total", "total")?.value, 2n, "whole seconds (CRI values are integers)");
  t.equal(find("container_cpu_usage_seconds_total", "total")?.kind, "counter");
  t.equal(find("container_memory_working_set_bytes")?.value, 4000n);
  t.equal(find("container_memory_working_set_bytes")?.kind, "gauge");
  t.equal(find("container_memory_usage_bytes")?.value, 5000n);
  t.equal(find("container_memory_failures_total", "pgmajfault", "hierarchy")?.value, 2n);
  t.equal(find("container_cpu_cfs_throttled_seconds_total")?.value, 3n);
  t.equal(find("container_spec_cpu_quota")?.value, 50000n);
  t.equal(find("container_last_seen")?.value, 1_700_000_000n);
  t.equal(find("container_start_time_seconds")?.value, 1_699_999_000n);
  t.equal(find("container_network_receive_bytes_total", "eth0")?.value, 100n);
  t.equal(find("container_network_transmit_packets_dropped_total", "eth0")?.value, 1n);
  t.equal(find("container_network_receive_bytes_total", "eth1")?.value, 5n);
  t.equal(find("container_fs_usage_bytes", "/dev/sda1")?.value, 12288n);
  t.equal(find("container_fs_inodes_free", "/dev/sda1")?.value, 900n);
  t.equal(find("container_fs_writes_bytes_total", "/dev/sda")?.value, 8192n);
});

t.test("samples: families without a reading are left out", async (t) => {
  const bare = seriesMetrics({ labels: source.labels, timestamp: source.timestamp, startedAt: 0n, cgroup: source.cgroup });
  const names = new Set(bare.map((m) => m.name));
  t.ok(names.has("container_cpu_usage_seconds_total"));
  t.notOk(names.has("container_network_receive_bytes_total"), "no network counters on a workload container");
  t.notOk(names.has("container_start_time_seconds"), "unknown start time");
  t.notOk(names.has("container_cpu_cfs_periods_total"), "no CFS figures without a quota");
  t.notOk(names.has("container_fs_usage_bytes"));
});

/** What critest v1.37.0's metrics specs (pkg/validate/pod.go) expect every runtime to describe and report. */
const CRITEST_V137_EXPECTED = [
  "container_blkio_device_usage_total",
  "container_cpu_cfs_periods_total",
  "container_cpu_cfs_throttled_periods_total",
  "container_cpu_cfs_throttled_seconds_total",
  "container_cpu_system_seconds_total",
  "container_cpu_usage_seconds_total",
  "container_cpu_user_seconds_total",
  "container_file_descriptors",
  "container_fs_inodes_free",
  "container_fs_inodes_total",
  "container_fs_limit_bytes",
  "container_fs_reads_bytes_total",
  "container_fs_reads_total",
  "container_fs_usage_bytes",
  "container_fs_writes_bytes_total",
  "container_fs_writes_total",
  "container_last_seen",
  "container_memory_cache",
  "container_memory_failcnt",
  "container_memory_failures_total",
  "container_memory_kernel_usage",
  "container_memory_mapped_file",
  "container_memory_max_usage_bytes",
  "container_memory_rss",
  "container_memory_swap",
  "container_memory_usage_bytes",
  "container_memory_working_set_bytes",
  "container_network_receive_bytes_total",
  "container_network_receive_errors_total",
  "container_network_receive_packets_dropped_total",
  "container_network_receive_packets_total",
  "container_network_transmit_bytes_total",
  "container_network_transmit_errors_total",
  "container_network_transmit_packets_dropped_total",
  "container_network_transmit_packets_total",
  "container_oom_events_total",
  "container_processes",
  "container_sockets",
  "container_spec_cpu_period",
  "container_spec_cpu_shares",
  "container_spec_memory_limit_bytes",
  "container_spec_memory_swap_limit_bytes",
  "container_start_time_seconds",
  "container_threads",
  "container_threads_max",
];

t.test("descriptors: every family critest v1.37.0 expects, with help and label keys", async (t) => {
  const byName = new Map(metricDescriptors().map((d) => [d.name, d]));
  const missing = CRITEST_V137_EXPECTED.filter((name) => !byName.has(name));
  t.same(missing, [], "none missing");
  for (const name of CRITEST_V137_EXPECTED) {
    t.ok(byName.get(name)?.help, `${name} has help`);
    t.ok(byName.get(name)?.labelKeys.length, `${name} has label keys`);
  }
  const help = (name: string) => byName.get(name)?.help;
  const extra = (name: string) => byName.get(name)?.labelKeys.slice(BASE_LABEL_KEYS.length);
  // cAdvisor's own texts and labels (metrics/prometheus.go), which dashboards match on.
  t.equal(help("container_blkio_device_usage_total"), "Blkio Device bytes usage");
  t.same(extra("container_blkio_device_usage_total"), ["device", "major", "minor", "operation"]);
  t.equal(help("container_file_descriptors"), "Number of open file descriptors for the container.");
  t.equal(help("container_sockets"), "Number of open sockets for the container.");
  t.equal(help("container_threads"), "Number of threads running inside the container");
  t.equal(help("container_threads_max"), "Maximum number of threads allowed inside the container, infinity if value is zero");
  t.equal(help("container_memory_kernel_usage"), "Size of kernel memory allocated in bytes.");
  t.equal(help("container_spec_memory_swap_limit_bytes"), "Memory swap limit for the container.");
  for (const name of ["container_file_descriptors", "container_sockets", "container_threads", "container_threads_max", "container_memory_kernel_usage", "container_spec_memory_swap_limit_bytes"]) {
    t.same(extra(name), [], `${name} has the base labels only`);
  }
});

t.test("samples: the figures critest v1.37.0 added, in cAdvisor's units and labels", async (t) => {
  const metrics = seriesMetrics(source);
  const find = (name: string, ...extra: string[]) => metrics.filter((m) => m.name === name && m.labelValues.slice(6).join(",") === extra.join(","));
  const value = (name: string, ...extra: string[]) => {
    const found = find(name, ...extra);
    t.equal(found.length, 1, `${name}{${extra.join(",")}} once`);
    return found[0]?.value;
  };
  t.equal(value("container_file_descriptors"), 12n);
  t.equal(value("container_sockets"), 3n);
  t.equal(value("container_threads"), 7n);
  t.equal(value("container_threads_max"), 1024n);
  t.equal(value("container_memory_kernel_usage"), 65536n);
  t.equal(value("container_spec_memory_swap_limit_bytes"), 64n << 20n);
  t.equal(value("container_processes"), 2n, "the processes of cgroup.procs, as cAdvisor counts them, not the pids controller's tasks");
  t.equal(value("container_blkio_device_usage_total", "/dev/sda", "8", "0", "Read"), 4096n);
  t.equal(value("container_blkio_device_usage_total", "/dev/sda", "8", "0", "Write"), 8192n);
  t.equal(value("container_blkio_device_usage_total", "/dev/sda", "8", "0", "Total"), 12288n);
  t.equal(find("container_blkio_device_usage_total", "/dev/sda", "8", "0", "Read")[0]?.kind, "counter");
  t.equal(find("container_threads")[0]?.kind, "gauge");

  const zero = seriesMetrics({ ...source, detail: { ...source.detail!, threadsMax: 0n, memorySwapLimit: 0n, procs: [] } });
  t.equal(zero.find((m) => m.name === "container_threads_max")?.value, 0n, "no pids limit is 0, which the help text calls infinity");
  t.equal(zero.find((m) => m.name === "container_spec_memory_swap_limit_bytes")?.value, 0n, "no swap limit is 0, as in cAdvisor");
  t.equal(zero.find((m) => m.name === "container_processes")?.value, 3n, "without cgroup.procs, the pids controller's count");

  const bare = new Set(seriesMetrics({ labels: source.labels, timestamp: source.timestamp, startedAt: 0n, cgroup: source.cgroup }).map((m) => m.name));
  for (const name of ["container_file_descriptors", "container_sockets", "container_threads", "container_blkio_device_usage_total", "container_memory_kernel_usage"]) {
    t.notOk(bare.has(name), `${name} is left out without a reading`);
  }
});
