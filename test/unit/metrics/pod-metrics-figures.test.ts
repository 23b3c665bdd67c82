/**
 * The figures critest v1.37.0's metrics specs added, read from fake cgroup
 * and /proc trees on v1 and v2: kernel memory, the swap limit, threads and
 * their limit, the processes of the cgroup, open descriptors and sockets,
 * and blkio bytes per operation; then ListPodSandboxMetrics end to end,
 * checked as critest checks it (every described family reported for the
 * pod, with as many label values as its descriptor has keys).
 */
import t, { type Test } from "tap";
import { mkdtemp, mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CgroupReader } from "../../../src/stats/cgroups.ts";
import { kernelMemoryV2, readCgroupDetail } from "../../../src/stats/cgroup-detail.ts";
import { countDescriptors, countThreads, readCgroupProcs } from "../../../src/stats/process-files.ts";
import { DESCRIPTORS_TTL_MS, PodMetricsService } from "../../../src/runtime/pod-metrics.ts";
import { metricDescriptors } from "../../../src/runtime/cadvisor-metrics.ts";
import type { StatsService } from "../../../src/runtime/stats.ts";
import type { DockerClient } from "../../../src/docker/client.ts";
import type { Logger } from "../../../src/log.ts";

async function tree(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "podmetrics-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function files(dir: string, entries: Record<string, string>): Promise<void> {
  for (const [name, content] of Object.entries(entries)) {
    await mkdir(join(dir, name, ".."), { recursive: true });
    await writeFile(join(dir, name), content);
  }
}

/** A process in the fake /proc: its cgroup file, descriptors (name → link) and thread ids. */
async function proc(root: string, pid: number, cgroup: string, fds: Record<string, string>, tasks: number[] = [pid]): Promise<void> {
  const dir = join(root, "proc", String(pid));
  await mkdir(join(dir, "fd"), { recursive: true });
  await writeFile(join(dir, "cgroup"), cgroup);
  for (const [fd, target] of Object.entries(fds)) await symlink(target, join(dir, "fd", fd));
  for (const task of tasks) await mkdir(join(dir, "task", String(task)), { recursive: true });
}

t.test("process files: cgroup.procs, descriptors and sockets, threads", async (t) => {
  const root = await tree(t);
  await files(root, { "cg/cgroup.procs": "42\n43\nnot-a-pid\n0\n../1\n" });
  await proc(root, 42, "", { "0": "/dev/null", "1": "socket:[1001]", "2": "pipe:[7]", "3": "anon_inode:[eventfd]" }, [42, 44, 45]);
  await proc(root, 43, "", { "0": "socket:[1002]" });
  t.same(await readCgroupProcs(join(root, "cg")), [42, 43], "only plain pids; nothing that could become a path");
  t.same(await readCgroupProcs(join(root, "missing")), [], "no cgroup, no processes");
  t.same(countDescriptors([42, 43], join(root, "proc")), { fds: 5n, sockets: 2n });
  t.same(countDescriptors([42, 99], join(root, "proc")), { fds: 4n, sockets: 1n }, "a process gone since the listing is skipped");
  t.equal(countThreads([42, 43, 99], join(root, "proc")), 4n);
});

t.test("cgroup v1: kmem, memsw limit, pids, cpu cgroup.procs, blkio per operation", async (t) => {
  const root = await tree(t);
  const path = "/kubepods/burstable/podu/c1";
  const sys = join(root, "sys");
  await proc(root, 42, `11:blkio:${path}\n4:memory:${path}\n3:cpu,cpuacct:${path}\n8:pids:${path}\n`, { "0": "/dev/null", "1": "socket:[5]" });
  await proc(root, 43, "", { "0": "socket:[6]", "1": "socket:[7]" });
  await files(sys, {
    [`memory${path}/memory.stat`]: "cache 10\ntotal_cache 100\ntotal_rss 200\n",
    [`memory${path}/memory.kmem.usage_in_bytes`]: "8192\n",
    [`memory${path}/memory.memsw.limit_in_bytes`]: "67108864\n",
    [`cpu${path}/cgroup.procs`]: "42\n43\n",
    [`pids${path}/pids.current`]: "5\n",
    [`pids${path}/pids.max`]: "max\n",
    [`blkio${path}/blkio.throttle.io_service_bytes_recursive`]: "8:0 Read 4096\n8:0 Write 512\n8:0 Sync 0\n8:0 Async 4608\n8:0 Discard 0\n8:0 Total 4608\nTotal 4608\n",
    // The root cgroup's pids must never be read as a container's.
    "pids/pids.current": "999\n",
  });
  const reader = new CgroupReader(sys, join(root, "proc"), 1);
  const detail = await readCgroupDetail(reader, 42);
  t.equal(detail?.memoryKernelUsage, 8192n);
  t.equal(detail?.memorySwapLimit, 64n << 20n, "memsw as the kernel holds it (memory plus swap), as cAdvisor reports it");
  t.equal(detail?.threads, 5n, "pids.current");
  t.equal(detail?.threadsMax, 0n, "pids.max \"max\" is 0");
  t.same(detail?.procs, [42, 43]);
  t.same(
    detail?.blockIo[0]?.serviceBytes.map((b) => b.op),
    ["Read", "Write", "Sync", "Async", "Discard", "Total"],
  );
  t.same(countDescriptors(detail!.procs, reader.proc), { fds: 4n, sockets: 3n });

  // No pids controller, no kmem file, memsw unlimited: threads from /proc, and cAdvisor's zeros.
  await proc(root, 50, `4:memory:${path}-b\n3:cpu,cpuacct:${path}-b\n`, {}, [50, 51, 52]);
  await files(sys, {
    [`memory${path}-b/memory.stat`]: "total_cache 1\n",
    [`memory${path}-b/memory.memsw.limit_in_bytes`]: "9223372036854771712\n",
    [`cpu${path}-b/cgroup.procs`]: "50\n",
  });
  const bare = await readCgroupDetail(reader, 50);
  t.equal(bare?.threads, 3n, "the tasks of the cgroup's processes");
  t.equal(bare?.threadsMax, 0n);
  t.equal(bare?.memoryKernelUsage, 0n, "no kmem accounting: 0, as cAdvisor reports");
  t.equal(bare?.memorySwapLimit, 0n, "unlimited is 0");

  // A process with no cpu hierarchy of its own is never given the root cgroup's processes (the host's).
  await proc(root, 60, `4:memory:${path}-b\n`, {});
  await files(sys, { "cpu/cgroup.procs": "1\n2\n60\n" });
  t.same((await readCgroupDetail(reader, 60))?.procs, []);
});

t.test("cgroup v2: memory.stat kernel, memory.swap.max, pids.max, io.stat", async (t) => {
  const root = await tree(t);
  const path = "/kubepods.slice/kubepods-pod1.slice/cri-c2.scope";
  const sys = join(root, "sys");
  await proc(root, 7, `0::${path}\n`, { "0": "socket:[1]", "1": "/dev/null", "2": "/dev/null" });
  await files(sys, {
    [`${path}/memory.stat`]: "anon 4096\nfile 100\nkernel 12345\nkernel_stack 16384\nslab 1000\n",
    [`${path}/memory.swap.max`]: "max\n",
    [`${path}/pids.current`]: "3\n",
    [`${path}/pids.max`]: "100\n",
    [`${path}/cgroup.procs`]: "7\n",
    [`${path}/io.stat`]: "8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n",
  });
  const reader = new CgroupReader(sys, join(root, "proc"), 2);
  const detail = await readCgroupDetail(reader, 7);
  t.equal(detail?.memoryKernelUsage, 12345n, "memory.stat kernel");
  t.equal(detail?.memorySwapLimit, 0n, "memory.swap.max \"max\" is 0");
  t.equal(detail?.threads, 3n);
  t.equal(detail?.threadsMax, 100n);
  t.same(detail?.procs, [7]);
  t.same(detail?.blockIo[0]?.serviceBytes, [
    { op: "Read", value: 10n },
    { op: "Write", value: 20n },
  ]);

  await files(sys, { [`${path}/memory.swap.max`]: "1048576\n" });
  t.equal((await readCgroupDetail(reader, 7))?.memorySwapLimit, 1048576n, "swap alone on v2");
  t.equal(kernelMemoryV2(new Map([["kernel_stack", 16384n], ["pagetables", 4096n], ["slab", 1000n], ["sock", 10n], ["anon", 1n]])), 21480n, "a kernel without the total: the sum of its documented parts (not sock, not anon)");
  t.equal(kernelMemoryV2(new Map()), undefined, "no memory.stat, no figure");

  // No unified path in /proc/<pid>/cgroup: nothing of the root cgroup is taken for the container's.
  await proc(root, 8, "1:name=systemd:/x\n", {});
  await files(sys, { "cgroup.procs": "1\n8\n" });
  t.same((await readCgroupDetail(reader, 8))?.procs, []);
});

/** critest v1.37.0: families every runtime may leave without a value (pkg/validate/pod.go). */
const CRITEST_UNIMPLEMENTED_OR_OPTIONAL = new Set([
  "container_hugetlb_max_usage_bytes",
  "container_hugetlb_usage_bytes",
  "container_spec_cpu_quota",
  "container_spec_memory_reservation_limit_bytes",
  "container_ulimits_soft",
  "container_blkio_device_usage_total",
  "container_fs_reads_bytes_total",
  "container_fs_reads_total",
  "container_fs_writes_bytes_total",
  "container_fs_writes_total",
]);

t.test("ListPodSandboxMetrics: every family described is reported for the pod, labels aligned; descriptors walked at most once per TTL", async (t) => {
  const root = await tree(t);
  const sys = join(root, "sys");
  const podPath = "/kubepods.slice/kubepods-pod1.slice";
  const cgroupFiles = (path: string, procs: string) => ({
    [`${path}/cpu.stat`]: "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 3000000\n",
    [`${path}/cpu.max`]: "20000 100000\n",
    [`${path}/cpu.weight`]: "100\n",
    [`${path}/memory.current`]: "8192000\n",
    [`${path}/memory.max`]: "67108864\n",
    [`${path}/memory.stat`]: "anon 4096000\nfile 100\nfile_mapped 10\ninactive_file 1000\npgfault 5\npgmajfault 1\nkernel 8192\n",
    [`${path}/memory.events`]: "max 0\noom_kill 0\n",
    [`${path}/memory.swap.current`]: "0\n",
    [`${path}/memory.swap.max`]: "67108864\n",
    [`${path}/memory.peak`]: "9000000\n",
    [`${path}/pids.current`]: "2\n",
    [`${path}/pids.max`]: "max\n",
    [`${path}/cgroup.procs`]: procs,
    [`${path}/io.stat`]: "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n",
  });
  await files(sys, { ...cgroupFiles(`${podPath}/pause.scope`, "7\n"), ...cgroupFiles(`${podPath}/app.scope`, "42\n") });
  await proc(root, 7, `0::${podPath}/pause.scope\n`, { "0": "/dev/null" });
  await proc(root, 42, `0::${podPath}/app.scope\n`, { "0": "/dev/null", "1": "socket:[9]" });

  const timestamp = 1_700_000_000_000_000_000n;
  const sample = { cpuUsageNanos: 5_000_000_000n, memoryUsageBytes: 8192000n, workingSetBytes: 8191000n, rssBytes: 4096000n, pageFaults: 5n, majorPageFaults: 1n, limitBytes: 67108864n, processes: 2n, pressure: undefined };
  const usage = { timestamp, cgroup: sample, usageNanoCores: 0n, writableLayer: { bytes: 4096n, inodes: 3n, measuredAt: timestamp, walkMs: 1 } };
  const process = (pid: number, name: string) => ({ dockerName: name, image: "busybox", pid, startedAt: timestamp - 5_000_000_000n });
  const pod = {
    id: "pod1",
    metadata: { name: "web", namespace: "default", uid: "u", attempt: 0 },
    labels: {},
    annotations: {},
    timestamp,
    cgroup: sample,
    usageNanoCores: 0n,
    network: { timestamp, interfaces: [{ name: "eth0", rxBytes: 1n, rxPackets: 1n, rxErrors: 0n, rxDropped: 0n, txBytes: 1n, txPackets: 1n, txErrors: 0n, txDropped: 0n }] },
    containers: [{ id: "c1", sandboxId: "pod1", metadata: { name: "app", attempt: 0 }, labels: {}, annotations: {}, usage, layerMountpoint: root, process: process(42, "k8s_app_web_default_u_0") }],
    pause: { process: process(7, "k8s_POD_web_default_u_0"), usage },
  };
  const stats = { listPodStats: async () => [pod] } as unknown as StatsService;
  const docker = { info: async () => ({ DockerRootDir: root }) } as unknown as DockerClient;
  const log = { debug() {}, info() {}, warn() {} } as unknown as Logger;
  let now = 1_000_000;
  const service = new PodMetricsService(stats, docker, log, new CgroupReader(sys, join(root, "proc"), 2), () => now);

  const [metrics] = await service.list();
  t.equal(metrics?.podSandboxId, "pod1");
  const found = new Map<string, string[]>();
  for (const m of [...metrics!.metrics, ...metrics!.containerMetrics.flatMap((c) => c.metrics)]) if (!found.has(m.name)) found.set(m.name, m.labelValues);
  for (const d of metricDescriptors()) {
    const values = found.get(d.name);
    if (!values) {
      t.ok(CRITEST_UNIMPLEMENTED_OR_OPTIONAL.has(d.name), `${d.name} is reported (or one critest lets a runtime leave out)`);
      continue;
    }
    t.equal(values.length, d.labelKeys.length, `${d.name}: as many label values as keys`);
  }
  const app = metrics!.containerMetrics.find((c) => c.containerId === "c1")!.metrics;
  const value = (name: string) => app.find((m) => m.name === name)?.value;
  t.equal(value("container_file_descriptors"), 2n);
  t.equal(value("container_sockets"), 1n);
  t.equal(value("container_threads"), 2n);
  t.equal(value("container_threads_max"), 0n);
  t.equal(value("container_memory_kernel_usage"), 8192n);
  t.equal(value("container_spec_memory_swap_limit_bytes"), 64n << 20n);
  t.equal(value("container_processes"), 1n);
  t.ok(app.some((m) => m.name === "container_blkio_device_usage_total" && m.labelValues.slice(6).join(",").endsWith(",8,0,Write")));
  t.equal(metrics!.metrics.find((m) => m.name === "container_file_descriptors")?.value, 1n, "the pause container's own");

  // Within the TTL a new descriptor is not seen (no second walk); after it, it is.
  await symlink("socket:[10]", join(root, "proc", "42", "fd", "2"));
  now += DESCRIPTORS_TTL_MS - 1;
  const again = (await service.list())[0]!.containerMetrics[0]!.metrics;
  t.equal(again.find((m) => m.name === "container_file_descriptors")?.value, 2n, "kept within the TTL");
  now += 1;
  const later = (await service.list())[0]!.containerMetrics[0]!.metrics;
  t.equal(later.find((m) => m.name === "container_file_descriptors")?.value, 3n, "walked again after it");
  t.equal(later.find((m) => m.name === "container_sockets")?.value, 2n);
});
