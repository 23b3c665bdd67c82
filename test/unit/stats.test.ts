import t from "tap";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHook } from "node:async_hooks";
import { CgroupReader, parseKeyValues, parseProcCgroup } from "../../src/stats/cgroups.ts";
import { parseNetDev, readNetDev } from "../../src/stats/netdev.ts";
import { cpuRate, StatsCollector } from "../../src/stats/collector.ts";
import { sumSamples } from "../../src/runtime/stats.ts";
import { toContainerStats, toPodSandboxStats } from "../../src/cri/stats-rpcs.ts";

const ID = "396f6153a5106c1d433af8eadfa3bc64e31008bf139c7844b9f14b95b504f092";

t.test("/proc/<pid>/cgroup: v1 joined controllers, named hierarchies, v2 line", async (t) => {
  const paths = parseProcCgroup(`12:cpu,cpuacct:/kubepods/pod1/${ID}\n4:memory:/docker/${ID}\n1:name=systemd:/docker/${ID}\n0::/docker/${ID}\n`);
  t.equal(paths.get("cpu"), `/kubepods/pod1/${ID}`);
  t.equal(paths.get("cpuacct"), `/kubepods/pod1/${ID}`);
  t.equal(paths.get("memory"), `/docker/${ID}`);
  t.equal(paths.get("systemd"), `/docker/${ID}`);
  t.equal(paths.get(""), `/docker/${ID}`);
});

t.test("key/value files ignore what is not a number", async (t) => {
  const values = parseKeyValues("total_rss 4096\ntotal_inactive_file 100\nsome_key notanumber\n\n");
  t.same([...values], [["total_rss", 4096n], ["total_inactive_file", 100n]]);
});

async function fakeProc(dir: string, pid: number, cgroupText: string) {
  await mkdir(join(dir, "proc", String(pid)), { recursive: true });
  await writeFile(join(dir, "proc", String(pid), "cgroup"), cgroupText);
}

t.test("cgroup v1: working set excludes inactive file cache; unlimited is no limit", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cg1-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = `/docker/${ID}`;
  await fakeProc(dir, 42, `4:memory:${path}\n2:cpu,cpuacct:${path}\n8:pids:${path}\n`);
  const cg = (c: string) => join(dir, "sys", c, path);
  for (const c of ["cpuacct", "memory", "pids"]) await mkdir(cg(c), { recursive: true });
  await writeFile(join(cg("cpuacct"), "cpuacct.usage"), "21685280\n");
  await writeFile(join(cg("memory"), "memory.usage_in_bytes"), "1000000\n");
  await writeFile(join(cg("memory"), "memory.limit_in_bytes"), "9223372036854771712\n");
  await writeFile(join(cg("memory"), "memory.stat"), "rss 1\ntotal_rss 300000\ntotal_inactive_file 250000\ntotal_pgfault 897\ntotal_pgmajfault 3\n");
  await writeFile(join(cg("pids"), "pids.current"), "2\n");
  const sample = await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 1).sample(42);
  t.same(sample, {
    cpuUsageNanos: 21685280n,
    memoryUsageBytes: 1000000n,
    workingSetBytes: 750000n,
    rssBytes: 300000n,
    pageFaults: 897n,
    majorPageFaults: 3n,
    limitBytes: undefined,
    processes: 2n,
  });
  await writeFile(join(cg("memory"), "memory.limit_in_bytes"), "15728640\n");
  t.equal((await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 1).sample(42)).limitBytes, 15728640n);
});

t.test("cgroup v2: cpu.stat usage_usec, memory.max", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cg2-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = `/system.slice/docker-${ID}.scope`;
  await fakeProc(dir, 7, `0::${path}\n`);
  const cg = join(dir, "sys", path);
  await mkdir(cg, { recursive: true });
  await writeFile(join(cg, "cpu.stat"), "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\n");
  await writeFile(join(cg, "memory.current"), "2048000\n");
  await writeFile(join(cg, "memory.max"), "max\n");
  await writeFile(join(cg, "memory.stat"), "anon 1000000\ninactive_file 48000\npgfault 10\npgmajfault 1\n");
  await writeFile(join(cg, "pids.current"), "5\n");
  const sample = await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 2).sample(7);
  t.same(sample, {
    cpuUsageNanos: 5_000_000n,
    memoryUsageBytes: 2048000n,
    workingSetBytes: 2000000n,
    rssBytes: 1000000n,
    pageFaults: 10n,
    majorPageFaults: 1n,
    limitBytes: undefined,
    processes: 5n,
  });
});

t.test("a process that is gone is an error, not zeros", async (t) => {
  await t.rejects(new CgroupReader("/nonexistent", "/nonexistent", 1).sample(1));
});

t.test("CPU rate needs two samples of the same process far enough apart", async (t) => {
  const a = { pid: 1, usage: 1_000_000_000n, at: 10_000_000_000n };
  t.equal(cpuRate(undefined, a), undefined);
  t.equal(cpuRate(a, { pid: 1, usage: 1_500_000_000n, at: 11_000_000_000n }), 500_000_000n, "half a core");
  t.equal(cpuRate(a, { pid: 2, usage: 1_500_000_000n, at: 11_000_000_000n }), undefined, "restarted process");
  t.equal(cpuRate(a, { pid: 1, usage: 1_000_100_000n, at: 10_010_000_000n }), undefined, "10 ms apart is too short");
  t.equal(cpuRate(a, { pid: 1, usage: 10n, at: 11_000_000_000n }), undefined, "counter went backwards");
});

t.test("a container's stats asked twice in a row keep their CPU rate (kubelet's container stats, then its pod stats)", async (t) => {
  let usage = 1_000_000_000n;
  const cgroups = { sample: async () => ({ cpuUsageNanos: (usage += 50_000_000n) }) } as unknown as CgroupReader;
  const collector = new StatsCollector(cgroups);
  const target = { id: "c1", pid: 42 };
  t.equal((await collector.container(target)).usageNanoCores, undefined, "the first sample has no rate");
  await new Promise((r) => setTimeout(r, 150));
  const rate = (await collector.container(target)).usageNanoCores;
  t.ok(rate !== undefined && rate > 0n, `150 ms later: a rate (${rate})`);
  t.equal((await collector.container(target)).usageNanoCores, rate, "asked again at once: the same rate, not none");
  t.equal((await collector.container({ id: "c1", pid: 43 })).usageNanoCores, undefined, "a new process starts over");
});

t.test("/proc/<pid>/net/dev leaves out loopback", async (t) => {
  const text = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     120       2    0    0    0     0          0         0      120       2    0    0    0     0       0          0
  eth0:     400       4    1    5    0     0          0         0      300       3    2    6    0     0       0          0
`;
  t.same(parseNetDev(text), [
    { name: "eth0", rxBytes: 400n, rxPackets: 4n, rxErrors: 1n, rxDropped: 5n, txBytes: 300n, txPackets: 3n, txErrors: 2n, txDropped: 6n },
  ]);
});

t.test("pod sums keep a limit only when every member has one", async (t) => {
  const base = { cpuUsageNanos: 1n, memoryUsageBytes: 10n, workingSetBytes: 5n, rssBytes: 2n, pageFaults: 1n, majorPageFaults: 0n, processes: 1n, pressure: undefined };
  const sum = sumSamples([{ ...base, limitBytes: 100n }, { ...base, limitBytes: undefined }]);
  t.match(sum, { cpuUsageNanos: 2n, memoryUsageBytes: 20n, workingSetBytes: 10n, processes: 2n });
  t.equal(sum.limitBytes, undefined);
  t.equal(sumSamples([{ ...base, limitBytes: 100n }, { ...base, limitBytes: 50n }]).limitBytes, 150n);
});

t.test("CRI conversion: available = limit - working set; stopped containers have no cpu/memory", async (t) => {
  const view = {
    id: ID,
    sandboxId: "s",
    metadata: { name: "app", attempt: 1 },
    labels: { a: "b" },
    annotations: {},
    layerMountpoint: "/var/lib/docker",
    process: { dockerName: "k8s_app_p_ns_u_1", image: "busybox", pid: 10, startedAt: 1n },
    usage: {
      timestamp: 5n,
      usageNanoCores: 7n,
      cgroup: { cpuUsageNanos: 9n, memoryUsageBytes: 100n, workingSetBytes: 60n, rssBytes: 50n, pageFaults: 1n, majorPageFaults: 0n, limitBytes: 80n, processes: 1n, pressure: undefined },
      writableLayer: { bytes: 4096n, inodes: 3n, measuredAt: 4n, walkMs: 1 },
    },
  };
  const stats = toContainerStats(view);
  t.same(stats.cpu, { timestamp: 5n, usageCoreNanoSeconds: { value: 9n }, usageNanoCores: { value: 7n }, psi: null });
  t.equal(stats.io, null, "no pressure, no io");
  t.equal(stats.memory?.availableBytes?.value, 20n);
  t.equal(stats.memory?.workingSetBytes?.value, 60n);
  t.same(stats.writableLayer, { timestamp: 4n, fsId: { mountpoint: "/var/lib/docker" }, usedBytes: { value: 4096n }, inodesUsed: { value: 3n } });
  const stopped = toContainerStats({ ...view, usage: { ...view.usage, cgroup: undefined, usageNanoCores: undefined } });
  t.equal(stopped.cpu, null);
  t.equal(stopped.memory, null);
});

t.test("writable layer walker: sums allocated bytes and inodes, re-walks when stale", async (t) => {
  const { DiskUsageCache, walkUsage } = await import("../../src/stats/disk-usage.ts");
  const { symlink } = await import("node:fs/promises");
  const dir = await mkdtemp(join(tmpdir(), "layer-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, "a/b"), { recursive: true });
  await writeFile(join(dir, "a/b/file"), Buffer.alloc(64 * 1024, 1));
  await symlink("/etc/passwd", join(dir, "link"));
  const usage = await walkUsage(dir);
  t.equal(usage.inodes, 4n, "a, a/b, a/b/file and the link (not followed)");
  t.ok(usage.bytes >= 64n * 1024n, "the file's blocks are counted");

  const cache = new DiskUsageCache(0, 0);
  const first = await cache.get(dir);
  t.equal(first?.inodes, 4n);
  await writeFile(join(dir, "more"), "x");
  await new Promise((r) => setTimeout(r, 5));
  await cache.get(dir); // stale: schedules a new walk
  await new Promise((r) => setTimeout(r, 50));
  t.equal((await cache.get(dir))?.inodes, 5n, "the new file shows after the refresh");
  t.equal(await new DiskUsageCache().get(join(dir, "missing")).then((u) => u?.inodes), 0n, "a vanished layer walks as empty");
});

t.test("a pod network without interfaces is no network: kubelet dereferences default_interface", async (t) => {
  const view = {
    id: ID,
    metadata: { name: "p", namespace: "ns", uid: "u", attempt: 0 },
    labels: {},
    annotations: {},
    timestamp: 5n,
    cgroup: undefined,
    usageNanoCores: undefined,
    containers: [],
    pause: {} as never,
  };
  t.equal(toPodSandboxStats({ ...view, network: { timestamp: 5n, interfaces: [] } }).linux?.network, null);
  const eth0 = { name: "eth0", rxBytes: 1n, rxPackets: 1n, rxErrors: 0n, rxDropped: 0n, txBytes: 2n, txPackets: 1n, txErrors: 0n, txDropped: 0n };
  const network = toPodSandboxStats({ ...view, network: { timestamp: 5n, interfaces: [eth0] } }).linux?.network;
  t.equal(network?.defaultInterface?.name, "eth0");
  t.equal(network?.interfaces?.length, 1);
});

t.test("sampling a cgroup reads the kernel's files without libuv's threadpool", async (t) => {
  const reader = new CgroupReader();
  // The first sample also detects the hierarchy's version (a statfs, once).
  await reader.sample(process.pid);
  let requests = 0;
  const hook = createHook({
    init(_id, type) {
      if (type.startsWith("FSREQ")) requests++;
    },
  }).enable();
  let sample;
  try {
    for (let i = 0; i < 5; i++) sample = await reader.sample(process.pid);
    await readNetDev(process.pid);
  } finally {
    hook.disable();
  }
  t.ok(sample!.cpuUsageNanos > 0n, "this process's CPU time is read");
  // Each file through fs/promises was four rounds (open, fstat, read, close): five samples, six files, a hundred and more.
  t.equal(requests, 0, "no file request went through the threadpool");
});
