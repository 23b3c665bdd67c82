// Container and pod stats read from the kernel: a busy container shows CPU, a
// container holding memory shows it in its working set, a file written into
// the rootfs shows in the writable layer, filters select what they say.
import t, { type Test } from "tap";
import { access, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness } from "../containers/harness.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";

const MiB = 1024n * 1024n;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test("stats of a pod with a busy container and a memory-holding container", async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));

  const busy = await createContainer(h, pod, containerConfig("busy", ["sh", "-c", "while :; do :; done"], { labels: { foo: "bar" } }));
  const holder = await createContainer(
    h,
    pod,
    containerConfig("holder", ["sh", "-c", "dd if=/dev/zero of=/dev/shm/hold bs=1M count=24 && dd if=/dev/zero of=/layer bs=1M count=6 && sleep 3600"], {
      labels: { foo: "qux" },
    }),
  );
  for (const id of [busy, holder]) await h.client.call("StartContainer", { containerId: id });

  // Wait (bounded) until the holder has written both files.
  // Layers are re-measured every few seconds, so allow some 30 s.
  let holderStats: any;
  for (let i = 0; i < 150; i++) {
    holderStats = (await h.client.call("ContainerStats", { containerId: holder })).stats;
    if (holderStats.memory?.workingSetBytes?.value >= 24n * MiB && holderStats.writableLayer?.usedBytes?.value >= 6n * MiB) break;
    await sleep(200);
  }

  t.test("ContainerStats: attributes, memory working set, writable layer", async (t) => {
    t.equal(holderStats.attributes.id, holder);
    t.same(holderStats.attributes.metadata, { name: "holder", attempt: 0 });
    t.same(holderStats.attributes.labels, { foo: "qux" });
    t.ok(holderStats.memory.timestamp > 0n, "memory timestamp");
    t.ok(holderStats.memory.workingSetBytes.value >= 24n * MiB, "24 MiB held in /dev/shm is in the working set");
    t.ok(holderStats.memory.usageBytes.value >= holderStats.memory.workingSetBytes.value, "usage includes the working set");
    t.ok(holderStats.writableLayer.usedBytes.value >= 6n * MiB, "the 6 MiB file is in the writable layer");
    t.ok(holderStats.writableLayer.inodesUsed.value >= 1n);
    t.ok(holderStats.writableLayer.fsId.mountpoint.length > 0);
  });

  t.test("ContainerStats: CPU time grows and a rate is reported for a busy loop", async (t) => {
    const first = (await h.client.call("ContainerStats", { containerId: busy })).stats;
    await sleep(1000);
    const second = (await h.client.call("ContainerStats", { containerId: busy })).stats;
    t.ok(first.cpu.timestamp > 0n);
    t.ok(second.cpu.usageCoreNanoSeconds.value > first.cpu.usageCoreNanoSeconds.value, "cumulative CPU grows");
    t.ok(second.cpu.usageNanoCores.value > 10_000_000n, `a busy loop uses more than 1% of a core (${second.cpu.usageNanoCores.value})`);
  });

  t.test("ContainerStats: pressure (PSI) of cpu, memory and io where the kernel keeps it per cgroup", async (t) => {
    // Where this host keeps the container's pressure: its v2 cgroup, on a v2
    // host or in the v2 hierarchy a v1 host mounts beside its controllers.
    const verbose = await h.client.call("ContainerStatus", { containerId: busy, verbose: true });
    const pid = JSON.parse(verbose.info.info).pid as number;
    const v2Path = /^0::(.*)$/m.exec(await readFile(`/proc/${pid}/cgroup`, "utf8"))?.[1];
    const dirs = v2Path && v2Path !== "/" ? [`/sys/fs/cgroup${v2Path}`, `/sys/fs/cgroup/unified${v2Path}`] : [];
    let dir: string | undefined;
    for (const d of dirs) if (await access(`${d}/cpu.pressure`).then(() => true, () => false)) dir ??= d;
    const stats = (await h.client.call("ContainerStats", { containerId: busy })).stats;
    if (!dir) {
      t.equal(stats.cpu.psi, null, "no pressure files for this container's cgroup: none reported");
      return;
    }
    const kernelCpuSome = BigInt(/^some .* total=(\d+)$/m.exec(await readFile(`${dir}/cpu.pressure`, "utf8"))![1]!) * 1000n;
    const again = (await h.client.call("ContainerStats", { containerId: busy })).stats;
    for (const [name, psi] of [["cpu", again.cpu.psi], ["memory", again.memory.psi], ["io", again.io?.psi]] as const) {
      t.ok(psi?.Some && psi?.Full, `${name}.psi has some and full (from ${dir})`);
      t.ok(psi.Some.Avg10 >= 0 && psi.Some.Avg10 <= 100, `${name} avg10 is a percentage`);
    }
    t.ok(again.cpu.psi.Some.Total >= kernelCpuSome, "cpu some total (ns) is at least what the kernel said before, in µs × 1000");
    t.ok(again.io.timestamp > 0n, "io has its time");
  });

  t.test("ListContainerStats filters by id, sandbox and labels", async (t) => {
    const ids = async (filter: object) =>
      (await h.client.call("ListContainerStats", { filter })).stats.map((s: { attributes: { id: string } }) => s.attributes.id).sort();
    t.same(await ids({ id: busy }), [busy]);
    t.same(await ids({ id: busy.slice(0, 12) }), [busy], "unique id prefix");
    t.same(await ids({ podSandboxId: pod.podSandboxId }), [busy, holder].sort());
    t.same(await ids({ labelSelector: { foo: "bar" } }), [busy]);
    t.same(await ids({ labelSelector: { foo: "baz" } }), []);
    const all = await ids({});
    t.ok(all.includes(busy) && all.includes(holder), "no filter lists every container");
  });

  t.test("PodSandboxStats sums the pod and reports its network", async (t) => {
    const { stats } = await h.client.call("PodSandboxStats", { podSandboxId: pod.podSandboxId });
    t.equal(stats.attributes.id, pod.podSandboxId);
    t.equal(stats.attributes.metadata.name, pod.config.metadata.name);
    t.same(stats.linux.containers.map((c: { attributes: { id: string } }) => c.attributes.id).sort(), [busy, holder].sort());
    t.ok(stats.linux.memory.workingSetBytes.value >= 24n * MiB, "pod memory includes the holder's");
    t.ok(stats.linux.process.processCount.value >= 3n, "pause, the loop and the sleeping shell");
    t.equal(stats.linux.network.defaultInterface.name, "eth0");
    t.ok(stats.linux.network.interfaces.every((i: { name: string }) => i.name !== "lo"), "loopback is left out");
    const listed = (await h.client.call("ListPodSandboxStats", { filter: { id: pod.podSandboxId } })).stats;
    t.equal(listed.length, 1);
  });

  t.test("ImageFsInfo counts the containers' writable layers", async (t) => {
    const fs = await h.client.imageCall("ImageFsInfo", {});
    t.equal(fs.containerFilesystems.length, 1);
    t.ok(fs.containerFilesystems[0].usedBytes.value >= 6n * MiB);
  });

  t.test("unknown and malformed ids", async (t) => {
    await t.rejects(h.client.call("ContainerStats", { containerId: "f".repeat(64) }), { code: grpcStatus.NOT_FOUND });
    await t.rejects(h.client.call("ContainerStats", { containerId: "../etc" }), { code: grpcStatus.INVALID_ARGUMENT });
    await t.rejects(h.client.call("PodSandboxStats", { podSandboxId: "f".repeat(64) }), { code: grpcStatus.NOT_FOUND });
  });

  t.test("after the pod is removed, nothing is left", async (t) => {
    await removePod(h, pod.podSandboxId);
    t.same(await leakedContainers(h), []);
    t.same((await h.client.call("ListContainerStats", { filter: { podSandboxId: pod.podSandboxId } })).stats, []);
  });
});

/** A cgroup parent for a test pod, removed after it: Docker makes it in every hierarchy and leaves it. */
function podCgroupParent(t: Test, name: string): string {
  const parent = `/cridock-test-${name}-${process.pid}`;
  t.teardown(async () => {
    for (const dir of await readdir("/sys/fs/cgroup").catch(() => [] as string[])) {
      await rmdir(`/sys/fs/cgroup/${dir}${parent}`).catch(() => undefined);
    }
    await rmdir(`/sys/fs/cgroup${parent}`).catch(() => undefined);
  });
  return parent;
}

t.test("a pod with a cgroup of its own (kubelet's cgroup parent) reports that cgroup's pressure", async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const parent = podCgroupParent(t, "psi");
  const pod = await runPod(h, { linux: { cgroupParent: parent } });
  t.teardown(() => removePod(h, pod.podSandboxId));
  const id = await createContainer(h, pod, containerConfig("loop", ["sh", "-c", "while :; do :; done"]));
  await h.client.call("StartContainer", { containerId: id });

  const pressureFile = [`/sys/fs/cgroup${parent}/cpu.pressure`, `/sys/fs/cgroup/unified${parent}/cpu.pressure`];
  let kernel: string | undefined;
  for (const file of pressureFile) kernel ??= await readFile(file, "utf8").catch(() => undefined);
  const { stats } = await h.client.call("PodSandboxStats", { podSandboxId: pod.podSandboxId });
  if (!kernel) {
    t.equal(stats.linux.cpu.psi, null, "no pressure files for the pod's cgroup: none reported");
    return;
  }
  const before = BigInt(/^some .* total=(\d+)$/m.exec(kernel)![1]!) * 1000n;
  t.ok(stats.linux.cpu.psi?.Some && stats.linux.memory.psi?.Some && stats.linux.io?.psi?.Some, "cpu, memory and io pressure of the pod");
  t.ok(stats.linux.cpu.psi.Some.Total >= before, "the pod cgroup's cpu total (ns), not a sum of its containers'");
  const container = stats.linux.containers.find((c: { attributes: { id: string } }) => c.attributes.id === id);
  t.ok(container.cpu.psi?.Some, "its container has its own");
});

t.test("a pod with a cgroup of its own reports the available memory under that cgroup's limit", async (t) => {
  const h = await startHarness();
  t.teardown(() => h.close());
  const parent = podCgroupParent(t, "limit");
  const pod = await runPod(h, { linux: { cgroupParent: parent } });
  t.teardown(() => removePod(h, pod.podSandboxId));
  const id = await createContainer(h, pod, containerConfig("sleeper", ["sleep", "3600"]));
  await h.client.call("StartContainer", { containerId: id });
  // kubelet puts the pod's limit on the pod's cgroup, not on the pause container.
  const limit = 512n * MiB;
  const v1 = `/sys/fs/cgroup/memory${parent}/memory.limit_in_bytes`;
  const v2 = `/sys/fs/cgroup${parent}/memory.max`;
  const file = (await access(v1).then(() => true, () => false)) ? v1 : v2;
  await writeFile(file, `${limit}\n`);
  const { stats } = await h.client.call("PodSandboxStats", { podSandboxId: pod.podSandboxId });
  const memory = stats.linux.memory;
  t.ok(memory.availableBytes, "available memory is reported");
  t.equal(memory.availableBytes.value + memory.workingSetBytes.value, limit, "available = the pod cgroup's limit - the pod's working set");
});
