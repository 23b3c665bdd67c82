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
    blockIo: [],
  },
  limits: { cpuShares: 512n, cpuQuota: 50000n, cpuPeriod: 100000n, memoryLimit: 8000n, cpusetCpus: "", cpusetMems: "", pidsLimit: 0n },
  blockIo: [{ device: "/dev/sda", readBytes: 4096n, writeBytes: 8192n, reads: 1n, writes: 2n }],
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
