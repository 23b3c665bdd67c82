/**
 * In-place resize against a real dockerd: UpdateContainerResources changes
 * the cgroup of a running container (read from inside it), ContainerStatus
 * reports the limits in force, a memory limit below the current usage is
 * refused with FAILED_PRECONDITION, and UpdatePodSandboxResources is
 * recorded and reported back. Works on cgroup v1 and v2; the `unified` keys
 * kubelet 1.36 sends are in force on v2 and refused with the reason on v1.
 */
import t from "tap";
import { statfsSync } from "node:fs";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, status } from "./harness.ts";

const V2 = statfsSync("/sys/fs/cgroup").type === 0x63677270;
const h = await startHarness();
t.teardown(async () => {
  await h.close();
});
const pod = await runPod(h);

const MiB = 1024n * 1024n;

async function exec(id: string, cmd: string[]): Promise<string> {
  const r = await h.client.call("ExecSync", { containerId: id, cmd, timeout: 10n });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")} exited ${r.exitCode}: ${Buffer.from(r.stderr).toString()}`);
  return Buffer.from(r.stdout).toString().trim();
}

/** The container's own cgroup files, as its processes see them. */
async function cgroupInside(id: string) {
  const read = (f: string) => exec(id, ["cat", `/sys/fs/cgroup/${f}`]);
  if (V2) {
    const [max, memory, pids, cpus] = await Promise.all([read("cpu.max"), read("memory.max"), read("pids.max"), read("cpuset.cpus")]);
    const [quota, period] = max.split(" ");
    return { quota, period, memory, pids, cpus };
  }
  const [quota, period, shares, memory, pids, cpus] = await Promise.all([
    read("cpu/cpu.cfs_quota_us"),
    read("cpu/cpu.cfs_period_us"),
    read("cpu/cpu.shares"),
    read("memory/memory.limit_in_bytes"),
    read("pids/pids.max"),
    read("cpuset/cpuset.cpus"),
  ]);
  return { quota, period, shares, memory, pids, cpus };
}

t.test("UpdateContainerResources resizes a running container in place", async (t) => {
  const id = await createContainer(
    h,
    pod,
    containerConfig("resized", ["sleep", "3600"], {
      linux: { resources: { cpuShares: 512n, cpuPeriod: 100000n, cpuQuota: 50000n, memoryLimitInBytes: 64n * MiB } },
    }),
  );
  await h.client.call("StartContainer", { containerId: id });
  let inside = await cgroupInside(id);
  t.equal(inside.quota, "50000", "initial quota in the cgroup");
  t.equal(inside.memory, String(64n * MiB), "initial memory limit in the cgroup");

  await h.client.call("UpdateContainerResources", {
    containerId: id,
    linux: {
      cpuShares: 1024n,
      cpuPeriod: 100000n,
      cpuQuota: 20000n,
      memoryLimitInBytes: 128n * MiB,
      cpusetCpus: "0",
      unified: { "pids.max": "50" },
    },
  });
  inside = await cgroupInside(id);
  t.equal(inside.quota, "20000", "cpu quota changed live");
  t.equal(inside.period, "100000", "cpu period");
  if (!V2) t.equal(inside.shares, "1024", "cpu shares changed live");
  t.equal(inside.memory, String(128n * MiB), "memory limit changed live");
  t.equal(inside.pids, "50", "pids limit changed live");
  t.equal(inside.cpus, "0", "cpuset changed live");

  const s = await status(h, id);
  t.equal(s.state, 1, "still running: the resize restarted nothing");
  const r = s.resources.linux;
  t.equal(r.cpuQuota, 20000n, "ContainerStatus reports the quota in force");
  t.equal(r.cpuPeriod, 100000n);
  t.equal(r.cpuShares, 1024n);
  t.equal(r.memoryLimitInBytes, 128n * MiB);
  t.equal(r.cpusetCpus, "0");
  t.same(r.unified, { "pids.max": "50" }, "pids limit reported through unified");

  // Only the quota: the rest stays as it is.
  await h.client.call("UpdateContainerResources", { containerId: id, linux: { cpuQuota: 30000n } });
  inside = await cgroupInside(id);
  t.equal(inside.quota, "30000");
  t.equal(inside.memory, String(128n * MiB), "memory untouched by a quota-only update");
});

t.test("a memory limit below the current usage is refused, naming both figures", async (t) => {
  const id = await createContainer(
    h,
    pod,
    containerConfig("filler", ["sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1048576 count=40 2>/dev/null; sleep 3600"], {
      linux: { resources: { memoryLimitInBytes: 256n * MiB } },
    }),
  );
  await h.client.call("StartContainer", { containerId: id });
  for (let i = 0; i < 100; i++) {
    const size = await exec(id, ["sh", "-c", "ls -l /dev/shm/fill 2>/dev/null | awk '{print $5}'"]).catch(() => "");
    if (size === String(40n * MiB)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await t.rejects(
    h.client.call("UpdateContainerResources", { containerId: id, linux: { memoryLimitInBytes: 16n * MiB } }),
    { code: grpcStatus.FAILED_PRECONDITION, message: /below the current usage.*working set \d+ bytes/ },
  );
  const inside = await cgroupInside(id);
  t.equal(inside.memory, String(256n * MiB), "the limit was left alone");
  t.equal((await status(h, id)).state, 1, "the container was not OOM-killed");
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("kubelet 1.36's unified keys: in force on cgroup v2, refused with the reason on v1", async (t) => {
  const unified = { "memory.oom.group": "1", "memory.swap.max": "0", "memory.high": String(48n * MiB) };
  const config = containerConfig("unified", ["sleep", "3600"], { linux: { resources: { memoryLimitInBytes: 64n * MiB, unified } } });
  if (!V2) {
    await t.rejects(createContainer(h, pod, config), { code: grpcStatus.UNIMPLEMENTED, message: /unified settings need cgroup v2; this node runs cgroup v1/ });
    return;
  }
  const id = await createContainer(h, pod, config);
  await h.client.call("StartContainer", { containerId: id });
  const read = (f: string) => exec(id, ["cat", `/sys/fs/cgroup/${f}`]);
  t.equal(await read("memory.oom.group"), "1", "written after the start");
  t.equal(await read("memory.high"), String(48n * MiB));
  t.equal(await read("memory.max"), String(64n * MiB));
  t.equal(await read("memory.swap.max").catch(() => "0"), "0", "no swap (through Docker's MemorySwap)");
  t.match((await status(h, id)).resources.linux.unified, { "memory.oom.group": "1", "memory.high": String(48n * MiB) }, "ContainerStatus: the values in force");
  await h.client.call("UpdateContainerResources", { containerId: id, linux: { unified: { "memory.high": String(56n * MiB) } } });
  t.equal(await read("memory.high"), String(56n * MiB), "a resize writes into the running container's cgroup");
  await t.rejects(h.client.call("UpdateContainerResources", { containerId: id, linux: { unified: { "memory.high": "lots" } } }), {
    code: grpcStatus.INVALID_ARGUMENT,
    message: /memory\.high="lots"/,
  });
  t.equal(await read("memory.high"), String(56n * MiB), "a refused value changes nothing");
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("bad resize requests", async (t) => {
  const id = await createContainer(h, pod, containerConfig("bad", ["sleep", "3600"]));
  await t.rejects(
    h.client.call("UpdateContainerResources", { containerId: id, linux: { unified: { "memory.high": "1000000" } } }),
    V2 ? { code: grpcStatus.FAILED_PRECONDITION, message: /not running/ } : { code: grpcStatus.UNIMPLEMENTED, message: /cgroup v1 \(memory\.high/ },
  );
  await t.rejects(h.client.call("UpdateContainerResources", { containerId: id, linux: { unified: { "../../memory.max": "1" } } }), {
    code: grpcStatus.INVALID_ARGUMENT,
  });
  await t.rejects(h.client.call("UpdateContainerResources", { containerId: id, linux: { unified: { "pids.max": "lots" } } }), {
    code: grpcStatus.INVALID_ARGUMENT,
  });
  await t.rejects(h.client.call("UpdateContainerResources", { containerId: id, linux: { cpuShares: -5n } }), { code: grpcStatus.INVALID_ARGUMENT });
  await t.rejects(h.client.call("UpdateContainerResources", { containerId: "f".repeat(64), linux: { cpuShares: 512n } }), {
    code: grpcStatus.NOT_FOUND,
  });
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("UpdatePodSandboxResources is recorded and reported back", async (t) => {
  await h.client.call("UpdatePodSandboxResources", {
    podSandboxId: pod.podSandboxId,
    overhead: { cpuShares: 10n },
    resources: { cpuShares: 1536n, cpuQuota: 50000n, cpuPeriod: 100000n, memoryLimitInBytes: 384n * MiB },
  });
  const st = await h.client.call("PodSandboxStatus", { podSandboxId: pod.podSandboxId, verbose: true });
  const info = JSON.parse(st.info.info);
  t.equal(info.podResources.resources.memoryLimitInBytes, String(384n * MiB));
  t.equal(info.podResources.overhead.cpuShares, "10");
  await t.rejects(h.client.call("UpdatePodSandboxResources", { podSandboxId: "e".repeat(64), resources: { cpuShares: 2n } }), {
    code: grpcStatus.NOT_FOUND,
  });
  await t.rejects(h.client.call("UpdatePodSandboxResources", { podSandboxId: pod.podSandboxId, resources: { memoryLimitInBytes: -1n } }), {
    code: grpcStatus.INVALID_ARGUMENT,
  });
});

t.test("no leaks", async (t) => {
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
});
