// The CRI metrics RPCs (kubelet's /metrics/cadvisor under
// PodAndContainerStatsFromCRI) against the stats RPCs for the same pod:
// cAdvisor names and labels, every sample matching its descriptor, and the
// same figures ListPodSandboxStats reports (CPU seconds, working set,
// writable layer, the pod's network counters).
import t from "tap";
import { containerConfig, createContainer, removePod, runPod, startHarness } from "../containers/harness.ts";

const MiB = 1024n * 1024n;
const NS = 1_000_000_000n;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const h = await startHarness();
t.teardown(() => h.close());
const pod = await runPod(h);
t.teardown(() => removePod(h, pod.podSandboxId));

const worker = await createContainer(
  h,
  pod,
  containerConfig("worker", ["sh", "-c", "dd if=/dev/zero of=/dev/shm/hold bs=1M count=24 && dd if=/dev/zero of=/layer bs=1M count=4 && sleep 3600"], {
    linux: { resources: { cpuPeriod: 100000n, cpuQuota: 50000n, memoryLimitInBytes: 256n * MiB } },
  }),
);
const stopped = await createContainer(h, pod, containerConfig("never-started", ["true"]));
await h.client.call("StartContainer", { containerId: worker });

// Wait (bounded) until the worker holds its memory and its layer was measured.
for (let i = 0; i < 150; i++) {
  const s = (await h.client.call("ContainerStats", { containerId: worker })).stats;
  if (s.memory?.workingSetBytes?.value >= 24n * MiB && s.writableLayer?.usedBytes?.value >= 4n * MiB) break;
  await sleep(200);
}

const descriptors: { name: string; help: string; labelKeys: string[] }[] = (await h.client.call("ListMetricDescriptors", {})).descriptors;
const keysOf = new Map(descriptors.map((d) => [d.name, d.labelKeys]));

type Metric = { name: string; labelValues: string[]; value: { value: bigint }; metricType: number; timestamp: bigint };
const statsList = (await h.client.call("ListPodSandboxStats", { filter: { id: pod.podSandboxId } })).stats;
const metricsList = (await h.client.call("ListPodSandboxMetrics", {})).podMetrics;
const podStats = statsList[0];
const podMetrics = metricsList.find((p: { podSandboxId: string }) => p.podSandboxId === pod.podSandboxId);

function labelsOf(m: Metric): Record<string, string> {
  const keys = keysOf.get(m.name) ?? [];
  return Object.fromEntries(keys.map((k, i) => [k, m.labelValues[i] ?? ""]));
}
const find = (metrics: Metric[], name: string, extra: Record<string, string> = {}) =>
  metrics.find((m) => m.name === name && Object.entries(extra).every(([k, v]) => labelsOf(m)[k] === v));

t.test("ListMetricDescriptors: cAdvisor's families with kubelet's label keys", async (t) => {
  for (const name of ["container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_network_receive_bytes_total", "container_fs_usage_bytes", "container_last_seen"]) {
    t.ok(keysOf.has(name), name);
  }
  t.same(keysOf.get("container_network_receive_bytes_total"), ["container", "id", "image", "name", "namespace", "pod", "interface"]);
});

t.test("every sample has its descriptor and the right number of label values", async (t) => {
  t.ok(podMetrics, "the pod is listed");
  const all: Metric[] = [...podMetrics.metrics, ...podMetrics.containerMetrics.flatMap((c: { metrics: Metric[] }) => c.metrics)];
  t.ok(all.length > 40, `${all.length} samples`);
  const bad = all.filter((m) => keysOf.get(m.name)?.length !== m.labelValues.length);
  t.same(bad.map((m) => m.name), [], "label values line up with label keys");
  const series = new Set(all.map((m) => `${m.name}{${m.labelValues.join(",")}}`));
  t.equal(series.size, all.length, "no duplicate series");
  t.same(
    podMetrics.containerMetrics.map((c: { containerId: string }) => c.containerId),
    [worker],
    "the container that never ran has no cgroup and no series",
  );
  t.notOk(podMetrics.containerMetrics.some((c: { containerId: string }) => c.containerId === stopped));
});

t.test("the same figures as ListPodSandboxStats", async (t) => {
  const workerStats = podStats.linux.containers.find((c: { attributes: { id: string } }) => c.attributes.id === worker);
  const workerMetrics: Metric[] = podMetrics.containerMetrics.find((c: { containerId: string }) => c.containerId === worker).metrics;

  const cpu = find(workerMetrics, "container_cpu_usage_seconds_total", { cpu: "total" })!;
  t.same(
    { container: labelsOf(cpu).container, pod: labelsOf(cpu).pod, namespace: labelsOf(cpu).namespace },
    { container: "worker", pod: pod.config.metadata.name, namespace: pod.config.metadata.namespace },
    "container, pod and namespace labels",
  );
  t.match(labelsOf(cpu).name, /^k8s_worker_/, "name is Docker's container name");
  t.ok((labelsOf(cpu).id ?? "").length > 1, `id is the cgroup path (${labelsOf(cpu).id})`);
  t.equal(cpu.metricType, 0, "counter");
  const cpuSeconds = workerStats.cpu.usageCoreNanoSeconds.value / NS;
  t.ok(cpu.value.value >= cpuSeconds && cpu.value.value <= cpuSeconds + 1n, `cpu seconds ${cpu.value.value} ≈ ${cpuSeconds}`);

  const ws = find(workerMetrics, "container_memory_working_set_bytes")!.value.value;
  const wsStats = workerStats.memory.workingSetBytes.value;
  const diff = ws > wsStats ? ws - wsStats : wsStats - ws;
  t.ok(ws >= 24n * MiB && diff < 4n * MiB, `working set ${ws} ≈ stats ${wsStats}`);
  t.equal(find(workerMetrics, "container_spec_cpu_quota")?.value.value, 50000n, "spec quota");
  t.equal(find(workerMetrics, "container_spec_memory_limit_bytes")?.value.value, 256n * MiB, "spec memory limit");
  const fsUsage = find(workerMetrics, "container_fs_usage_bytes");
  t.ok(fsUsage && fsUsage.value.value >= 4n * MiB, "writable layer as container_fs_usage_bytes");
  t.equal(fsUsage?.value.value, workerStats.writableLayer.usedBytes.value, "same layer figure as the stats");

  const podSeries: Metric[] = podMetrics.metrics;
  const rx = find(podSeries, "container_network_receive_bytes_total", { interface: "eth0" });
  t.ok(rx, "pod network counters on the pause series");
  t.equal(labelsOf(rx!).container, "POD");
  const rxStats = podStats.linux.network.interfaces.find((i: { name: string }) => i.name === "eth0").rxBytes.value;
  t.ok(rx!.value.value >= rxStats && rx!.value.value - rxStats < 64n * 1024n, `rx ${rx!.value.value} ≈ stats ${rxStats}`);
  t.ok(find(podSeries, "container_last_seen")!.value.value > 1_600_000_000n, "last seen is a unix time");
});

t.test("critest v1.37's check: every family described is reported for the pod with its label count", async (t) => {
  // Families critest lets a runtime leave without a value (pkg/validate/pod.go: unimplemented and optional ones).
  const mayLack = new Set([
    "container_spec_cpu_quota",
    "container_blkio_device_usage_total",
    "container_fs_reads_bytes_total",
    "container_fs_reads_total",
    "container_fs_writes_bytes_total",
    "container_fs_writes_total",
  ]);
  const all: Metric[] = [...podMetrics.metrics, ...podMetrics.containerMetrics.flatMap((c: { metrics: Metric[] }) => c.metrics)];
  const reported = new Set(all.map((m) => m.name));
  t.same(descriptors.filter((d) => !reported.has(d.name) && !mayLack.has(d.name)).map((d) => d.name), [], "none described and missing");
  for (const d of descriptors) t.ok(d.help && d.labelKeys.length > 0, `${d.name} has help and label keys`);

  const workerMetrics: Metric[] = podMetrics.containerMetrics.find((c: { containerId: string }) => c.containerId === worker).metrics;
  const value = (name: string) => find(workerMetrics, name)?.value.value;
  t.ok((value("container_processes") ?? 0n) >= 1n, `processes ${value("container_processes")}`);
  t.ok((value("container_threads") ?? 0n) >= (value("container_processes") ?? 1n), `threads ${value("container_threads")} ≥ processes`);
  t.ok(value("container_threads_max") !== undefined, `threads max ${value("container_threads_max")} (0: no pids limit)`);
  t.ok((value("container_file_descriptors") ?? 0n) >= 1n, `file descriptors ${value("container_file_descriptors")}`);
  t.ok(value("container_sockets") !== undefined, `sockets ${value("container_sockets")}`);
  t.ok(value("container_memory_kernel_usage") !== undefined, `kernel memory ${value("container_memory_kernel_usage")}`);
  t.ok(value("container_spec_memory_swap_limit_bytes") !== undefined, `swap limit ${value("container_spec_memory_swap_limit_bytes")}`);
});

t.test("StreamPodSandboxMetrics sends the same pods", async (t) => {
  const batches = await h.client.stream("StreamPodSandboxMetrics", {});
  const ids = batches.flatMap((b: { podSandboxMetrics: { podSandboxId: string }[] }) => b.podSandboxMetrics.map((p) => p.podSandboxId));
  t.ok(ids.includes(pod.podSandboxId));
  t.same(new Set(ids).size, ids.length, "each pod once");
});
