/**
 * Pressure stall information (src/stats/pressure.ts): the kernel's pressure
 * files parsed (totals from microseconds to nanoseconds, as kubelet's Summary
 * API states them), read from a v2 cgroup and, on a v1 host, from the v2
 * hierarchy mounted beside the controllers; and carried into CRI's
 * ContainerStats as cpu.psi, memory.psi and io.psi.
 */
import t from "tap";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CgroupReader } from "../../src/stats/cgroups.ts";
import { parsePressure } from "../../src/stats/pressure.ts";
import { toContainerStats } from "../../src/cri/stats-rpcs.ts";

const ID = "e60c40fbf593fa11d8e9901c217b4e11c67492e1b054953e958cf3bc11c7a1b4";
const CPU = "some avg10=1.50 avg60=0.25 avg300=0.00 total=62883\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=55757\n";
const MEMORY = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
const IO = "some avg10=12.00 avg60=3.10 avg300=0.70 total=900\nfull avg10=10.00 avg60=2.00 avg300=0.50 total=800\n";

t.test("a pressure file: some and full, totals in nanoseconds", async (t) => {
  t.same(parsePressure(CPU), {
    some: { avg10: 1.5, avg60: 0.25, avg300: 0, totalNanos: 62_883_000n },
    full: { avg10: 0, avg60: 0, avg300: 0, totalNanos: 55_757_000n },
  });
  // Kernels before 5.13 count only "some" for cpu.
  t.same(parsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"), {
    some: { avg10: 0, avg60: 0, avg300: 0, totalNanos: 7000n },
    full: undefined,
  });
  t.equal(parsePressure(""), undefined);
  t.equal(parsePressure("some avg10=x avg60=0 avg300=0 total=1\n"), undefined, "a malformed line is no pressure");
});

async function fakeTree(t: { teardown(fn: () => unknown): void }, procCgroup: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "psi-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, "proc", "42"), { recursive: true });
  await writeFile(join(dir, "proc", "42", "cgroup"), procCgroup);
  return dir;
}

async function writePressure(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "cpu.pressure"), CPU);
  await writeFile(join(dir, "memory.pressure"), MEMORY);
  await writeFile(join(dir, "io.pressure"), IO);
}

async function writeV1(sys: string, path: string): Promise<void> {
  const cg = (c: string) => join(sys, c, path);
  for (const c of ["cpuacct", "memory"]) await mkdir(cg(c), { recursive: true });
  await writeFile(join(cg("cpuacct"), "cpuacct.usage"), "1000\n");
  await writeFile(join(cg("memory"), "memory.usage_in_bytes"), "4096\n");
  await writeFile(join(cg("memory"), "memory.limit_in_bytes"), "9223372036854771712\n");
  await writeFile(join(cg("memory"), "memory.stat"), "total_rss 4096\n");
}

t.test("cgroup v1 with the v2 hierarchy beside it (hybrid): pressure from the 0:: path", async (t) => {
  const path = `/kubepods/besteffort/podu/${ID}`;
  const dir = await fakeTree(t, `4:memory:${path}\n2:cpu,cpuacct:${path}\n0::${path}\n`);
  await writeV1(join(dir, "sys"), path);
  await writePressure(join(dir, "sys", "unified", path));
  const sample = await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 1).sample(42);
  t.equal(sample.pressure?.cpu?.some.totalNanos, 62_883_000n);
  t.equal(sample.pressure?.memory?.full?.totalNanos, 0n);
  t.equal(sample.pressure?.io?.some.avg10, 12);
});

t.test("cgroup v1 alone (no v2 hierarchy, or the process in its root): no pressure, the rest as before", async (t) => {
  const path = `/docker/${ID}`;
  const dir = await fakeTree(t, `4:memory:${path}\n2:cpu,cpuacct:${path}\n0::/\n`);
  await writeV1(join(dir, "sys"), path);
  // The v2 root's own files are the host's, not the container's.
  await writePressure(join(dir, "sys", "unified"));
  const sample = await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 1).sample(42);
  t.equal(sample.pressure, undefined);
  t.equal(sample.memoryUsageBytes, 4096n);
});

t.test("cgroup v2: pressure from the cgroup's own directory", async (t) => {
  const path = `/system.slice/docker-${ID}.scope`;
  const dir = await fakeTree(t, `0::${path}\n`);
  const cg = join(dir, "sys", path);
  await writePressure(cg);
  await writeFile(join(cg, "cpu.stat"), "usage_usec 5\n");
  await writeFile(join(cg, "memory.current"), "10\n");
  await writeFile(join(cg, "memory.max"), "max\n");
  await writeFile(join(cg, "memory.stat"), "anon 1\n");
  const sample = await new CgroupReader(join(dir, "sys"), join(dir, "proc"), 2).sample(42);
  t.equal(sample.pressure?.io?.full?.totalNanos, 800_000n);
});

t.test("ContainerStats carries cpu, memory and io pressure", async (t) => {
  const pressure = { cpu: parsePressure(CPU), memory: parsePressure(MEMORY), io: parsePressure(IO) };
  const cgroup = {
    cpuUsageNanos: 9n, memoryUsageBytes: 100n, workingSetBytes: 60n, rssBytes: 50n, pageFaults: 1n, majorPageFaults: 0n,
    limitBytes: undefined, processes: 1n, pressure,
  };
  const stats = toContainerStats({
    id: ID,
    sandboxId: "s",
    metadata: { name: "app", attempt: 0 },
    labels: {},
    annotations: {},
    layerMountpoint: "/var/lib/docker",
    process: { dockerName: "k8s_app_p_ns_u_0", image: "busybox", pid: 10, startedAt: 1n },
    usage: { timestamp: 5n, usageNanoCores: 7n, cgroup, writableLayer: undefined },
  });
  t.same(stats.cpu?.psi, {
    Some: { Total: 62_883_000n, Avg10: 1.5, Avg60: 0.25, Avg300: 0 },
    Full: { Total: 55_757_000n, Avg10: 0, Avg60: 0, Avg300: 0 },
  });
  t.same(stats.memory?.psi?.Some, { Total: 0n, Avg10: 0, Avg60: 0, Avg300: 0 });
  t.same(stats.io, { timestamp: 5n, psi: { Some: { Total: 900_000n, Avg10: 12, Avg60: 3.1, Avg300: 0.7 }, Full: { Total: 800_000n, Avg10: 10, Avg60: 2, Avg300: 0.5 } } });
});

t.test("a pod's pressure is its cgroup's: one level above the pause container's", async (t) => {
  const pod = "/kubepods/besteffort/podu";
  const dir = await fakeTree(t, `4:memory:${pod}/${ID}\n0::${pod}/${ID}\n`);
  await writePressure(join(dir, "sys", "unified", pod));
  const reader = new CgroupReader(join(dir, "sys"), join(dir, "proc"), 1);
  t.equal((await reader.parentPressure(42))?.io?.some.totalNanos, 900_000n);
  // Directly under the root the parent is the whole host: no pod pressure.
  await writeFile(join(dir, "proc", "42", "cgroup"), `0::/${ID}\n`);
  t.equal(await reader.parentPressure(42), undefined);
});
