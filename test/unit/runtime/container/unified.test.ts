/**
 * The `unified` map of LinuxContainerResources, without a cgroup tree: which
 * keys are cgroup v2 interface file names (never paths, never core files),
 * which values are taken, which keys a Docker field carries and with what
 * value (as runc turns that field into the file on cgroup v2), which are
 * left to be written into the container's cgroup, the refusal of those on
 * cgroup v1, and the label that keeps them out of CRI responses.
 */
import t from "tap";
import { checkUnifiedKey, checkUnifiedValue, isUnifiedKey, validateUnified } from "../../../../src/cgroup-unified-keys.ts";
import { planUnified } from "../../../../src/runtime/container/unified.ts";
import { EMPTY_RESOURCES, hostResources, updateFor } from "../../../../src/runtime/container/resources.ts";
import { UNIFIED_LABEL, containerInfo, unifiedFromLabels } from "../../../../src/runtime/container/convert.ts";
import { validatePodResources } from "../../../../src/runtime/sandbox/pod-resources.ts";
import type { ContainerInspect } from "../../../../src/docker/types.ts";

const MiB = 1024 * 1024;

t.test("keys: cgroup v2 interface file names only", async (t) => {
  for (const key of ["memory.oom.group", "memory.swap.max", "memory.high", "memory.min", "memory.low", "pids.max", "io.max", "cpu.weight", "cpu.max", "cpuset.cpus", "misc.max", "rdma.max", "hugetlb.2MB.max", "hugetlb.1GB.rsvd.max"]) {
    t.doesNotThrow(() => checkUnifiedKey(key), key);
    t.ok(isUnifiedKey(key));
  }
  const refused: [string, RegExp][] = [
    ["../../memory.max", /"\.\.\/\.\.\/memory\.max" contains "\/"/],
    ["memory.max/../x", /contains "\/"/],
    ["/sys/fs/cgroup/memory.max", /contains "\/"/],
    ["..", /not <controller>\.<name>/],
    [".", /not <controller>\.<name>/],
    ["memory..max", /not a file name/],
    ["memory.", /not <controller>\.<name>/],
    ["memory", /not <controller>\.<name>/],
    [".memory", /not <controller>\.<name>/],
    ["Memory.max", /not <controller>\.<name>/],
    ["memory.max ", /not <controller>\.<name>/],
    ["memory.max\n", /not <controller>\.<name>/],
    ["memory.max\0", /not <controller>\.<name>/],
    ["cgroup.procs", /core cgroup file/],
    ["cgroup.subtree_control", /core cgroup file/],
    ["", /is empty/],
    [`memory.${"x".repeat(80)}`, /longer than 64/],
  ];
  for (const [key, message] of refused) {
    t.throws(() => checkUnifiedKey(key), { code: "INVALID_ARGUMENT", message }, JSON.stringify(key));
    t.notOk(isUnifiedKey(key));
  }
});

t.test("values: one line, no NUL, bounded", async (t) => {
  t.doesNotThrow(() => checkUnifiedValue("io.max", "8:0 rbps=1048576 wbps=max"));
  t.throws(() => checkUnifiedValue("memory.high", "1\nmax"), { code: "INVALID_ARGUMENT", message: /memory\.high value "1\\nmax" contains a newline/ });
  t.throws(() => checkUnifiedValue("memory.high", "1\0"), { code: "INVALID_ARGUMENT", message: /memory\.high/ });
  t.throws(() => checkUnifiedValue("memory.high", "1\r"), { code: "INVALID_ARGUMENT" });
  t.throws(() => checkUnifiedValue("memory.high", "9".repeat(5000)), { code: "INVALID_ARGUMENT", message: /longer than 4096/ });
  t.throws(() => checkUnifiedValue("memory.high", ""), { code: "INVALID_ARGUMENT", message: /empty/ });
  t.throws(() => validateUnified({ "memory.oom.group": "1", "../x.max": "1" }), { code: "INVALID_ARGUMENT", message: /"\.\.\/x\.max"/ });
});

t.test("what kubelet 1.36 sends on cgroup v2: Docker fields where Docker has them, the rest for the cgroup", async (t) => {
  const memory = { Memory: 128 * MiB, MemorySwap: 128 * MiB };
  // NoSwap: swap 0 is MemorySwap = Memory (runc writes memory.swap.max = MemorySwap - Memory = 0).
  t.same(planUnified({ "memory.oom.group": "1", "memory.swap.max": "0" }, memory, 2), {
    docker: { Memory: 128 * MiB, MemorySwap: 128 * MiB },
    files: { "memory.oom.group": "1" },
  });
  // LimitedSwap: kubelet's bytes on top of the memory limit.
  t.same(planUnified({ "memory.swap.max": String(32 * MiB) }, memory, 2).docker, { Memory: 128 * MiB, MemorySwap: 160 * MiB });
  t.same(planUnified({ "memory.swap.max": "max" }, memory, 2).docker, { Memory: 128 * MiB, MemorySwap: -1 });
  // No memory limit (a BestEffort container): nothing for Docker to add swap to, so the file.
  t.same(planUnified({ "memory.swap.max": "0" }, {}, 2), { docker: {}, files: { "memory.swap.max": "0" } });
  // MemoryQoS.
  t.same(planUnified({ "memory.high": "104857600", "memory.min": "67108864" }, memory, 2).files, { "memory.high": "104857600", "memory.min": "67108864" });
});

t.test("each Docker field, and where unified wins over the CRI field", async (t) => {
  t.same(planUnified({ "pids.max": "50" }, {}, 2).docker, { PidsLimit: 50 });
  t.same(planUnified({ "pids.max": "max" }, {}, 2).docker, { PidsLimit: -1 });
  t.throws(() => planUnified({ "pids.max": "0" }, {}, 2), { code: "INVALID_ARGUMENT", message: /pids\.max "0"/ });
  t.throws(() => planUnified({ "pids.max": "lots" }, {}, 2), { code: "INVALID_ARGUMENT" });
  // memory.max replaces memory_limit_in_bytes, keeping the CRI swap allowance (none here).
  t.same(planUnified({ "memory.max": String(256 * MiB) }, { Memory: 128 * MiB, MemorySwap: 128 * MiB }, 2).docker, { Memory: 256 * MiB, MemorySwap: 256 * MiB });
  t.same(planUnified({ "memory.max": String(256 * MiB), "memory.swap.max": String(MiB) }, { Memory: 128 * MiB }, 2).docker, { Memory: 256 * MiB, MemorySwap: 257 * MiB });
  // Below Docker's 6 MiB floor, or "max" (Docker's update cannot lift a limit): the file, and swap with it.
  t.same(planUnified({ "memory.max": "4096" }, {}, 2), { docker: {}, files: { "memory.max": "4096" } });
  t.same(planUnified({ "memory.max": "max", "memory.swap.max": "0" }, { Memory: 128 * MiB }, 2).files, { "memory.max": "max", "memory.swap.max": "0" });
  // memory.low is the reservation on v2 (runc writes it there).
  t.same(planUnified({ "memory.low": String(64 * MiB) }, {}, 2), { docker: { MemoryReservation: 64 * MiB }, files: {} });
  t.same(planUnified({ "memory.low": "max" }, {}, 2), { docker: {}, files: { "memory.low": "max" } });
  // cpu.max replaces cpu_quota and cpu_period within Docker's ranges.
  t.same(planUnified({ "cpu.max": "50000 100000" }, { CpuQuota: 20000 }, 2).docker, { CpuQuota: 50000, CpuPeriod: 100000 });
  t.same(planUnified({ "cpu.max": "max" }, {}, 2).docker, { CpuQuota: -1 });
  t.same(planUnified({ "cpu.max": "max 50000" }, {}, 2).docker, { CpuQuota: -1, CpuPeriod: 50000 });
  t.same(planUnified({ "cpu.max": "500 100000" }, {}, 2).files, { "cpu.max": "500 100000" });
  t.same(planUnified({ "cpu.max": "50000 100" }, {}, 2).files, { "cpu.max": "50000 100" });
  // cpu.weight: runc's shares-to-weight formula depends on its version, so never through CpuShares.
  t.same(planUnified({ "cpu.weight": "100" }, { CpuShares: 1024 }, 2), { docker: {}, files: { "cpu.weight": "100" } });
});

t.test("a resize's swap alone takes the container's memory limit", async (t) => {
  const current = { Memory: 128 * MiB, MemorySwap: 128 * MiB, OomScoreAdj: 0 };
  const plan = updateFor({ ...EMPTY_RESOURCES, unified: { "memory.swap.max": String(16 * MiB), "memory.oom.group": "1" } }, current, undefined, 2);
  t.same(plan, { docker: { Memory: 128 * MiB, MemorySwap: 144 * MiB }, files: { "memory.oom.group": "1" } });
  const resize = updateFor({ ...EMPTY_RESOURCES, memoryLimitInBytes: BigInt(256 * MiB), unified: { "memory.swap.max": "0" } }, current, undefined, 2);
  t.same(resize.docker, { Memory: 256 * MiB, MemorySwap: 256 * MiB }, "kubelet's resize under NoSwap");
});

t.test("cgroup v1: keys without a Docker field are UNIMPLEMENTED with the reason; Docker's keep working", async (t) => {
  t.throws(() => planUnified({ "memory.oom.group": "1", "memory.swap.max": "0" }, {}, 1), {
    code: "UNIMPLEMENTED",
    message: /unified settings need cgroup v2; this node runs cgroup v1 \(memory\.swap\.max, memory\.oom\.group/,
  });
  // A reservation is a soft limit on v1, not memory.low's protection.
  t.throws(() => planUnified({ "memory.low": String(64 * MiB) }, {}, 1), { code: "UNIMPLEMENTED", message: /memory\.low/ });
  t.same(planUnified({ "pids.max": "50", "memory.swap.max": "0", "cpu.max": "20000 100000" }, { Memory: 64 * MiB }, 1), {
    docker: { PidsLimit: 50, Memory: 64 * MiB, MemorySwap: 64 * MiB, CpuQuota: 20000, CpuPeriod: 100000 },
    files: {},
  });
  // Hostile keys are INVALID_ARGUMENT before any version question.
  t.throws(() => hostResources({ ...EMPTY_RESOURCES, unified: { "../../memory.max": "1" } }, 1), { code: "INVALID_ARGUMENT" });
});

t.test("the create body carries the Docker fields, never the files", async (t) => {
  const r = { ...EMPTY_RESOURCES, memoryLimitInBytes: BigInt(128 * MiB), unified: { "memory.oom.group": "1", "memory.swap.max": "0", "pids.max": "100" } };
  t.same(hostResources(r, 2), { Memory: 128 * MiB, MemorySwap: 128 * MiB, PidsLimit: 100 });
  t.throws(() => hostResources(r, 1), { code: "UNIMPLEMENTED" });
  t.throws(() => hostResources(r), { code: "INTERNAL" }, "keys need the cgroup version learnt first");
});

t.test("the label: kept for StartContainer, never in CRI responses", async (t) => {
  const labels = { a: "b", [UNIFIED_LABEL]: JSON.stringify({ "memory.oom.group": "1", "../x.max": "1", "pids.max": 5 }) };
  t.same(unifiedFromLabels(labels), { "memory.oom.group": "1" }, "keys or values that are not plain are dropped");
  t.same(unifiedFromLabels({ [UNIFIED_LABEL]: "[1]" }), {});
  t.same(unifiedFromLabels({ [UNIFIED_LABEL]: "{" }), {});
  const info = containerInfo({
    Id: "c".repeat(64), Name: "/k8s_app_pod_ns_uid_0", Created: "2024-01-01T00:00:00Z", Image: "sha256:1",
    State: { Status: "running", Running: true, Pid: 1, ExitCode: 0, StartedAt: "2024-01-01T00:00:01Z", FinishedAt: "0001-01-01T00:00:00Z" },
    Config: { Labels: labels, Image: "busybox" },
    HostConfig: {},
  } as unknown as ContainerInspect);
  t.same(info.labels, { a: "b" });
});

t.test("UpdatePodSandboxResources holds unified keys to the same syntax (and writes nothing)", async (t) => {
  t.doesNotThrow(() => validatePodResources("resources", { cpuShares: "1024", unified: { "memory.oom.group": "1" } }));
  t.throws(() => validatePodResources("resources", { unified: { "../../memory.max": "1" } }), { code: "INVALID_ARGUMENT" });
  t.throws(() => validatePodResources("resources", { unified: { "memory.high": "1\n2" } }), { code: "INVALID_ARGUMENT" });
});
