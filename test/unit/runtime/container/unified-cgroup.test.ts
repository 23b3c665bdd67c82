/**
 * `unified` keys against a fake cgroup v2 tree in a temp dir (the cgroup
 * root and /proc are parameters): the create-time check against the pod's
 * cgroup (cgroupfs path or systemd slice), the container's own cgroup found
 * from its init pid and refused when not named for it, the writes (and that
 * a hostile key never writes anywhere), the kernel's refusals as
 * INVALID_ARGUMENT naming key and value, undo, read-back for
 * ContainerStatus; then StartContainer and UpdateContainerResources on a
 * fake dockerd writing into the tree.
 */
import t, { type Test } from "tap";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CgroupReader } from "../../../../src/stats/cgroups.ts";
import { readCgroupLimits } from "../../../../src/stats/cgroup-limits.ts";
import { UnifiedCgroups, parentPath, sliceDir } from "../../../../src/runtime/container/unified-cgroup.ts";
import { ContainerManager, type ContainerManagerOptions } from "../../../../src/runtime/container/manager.ts";
import { ContainerResizer } from "../../../../src/runtime/container/resize.ts";
import { EMPTY_RESOURCES } from "../../../../src/runtime/container/resources.ts";
import { UNIFIED_LABEL } from "../../../../src/runtime/container/convert.ts";
import { createLogger } from "../../../../src/log.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { ContainerInspect, Resources } from "../../../../src/docker/types.ts";
import type { LogFollowers } from "../../../../src/logs/followers.ts";

const ID = "c".repeat(64);
const POD = "/kubepods/burstable/pod1";
const SLICE = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2.slice";

function files(dir: string, entries: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(entries)) writeFileSync(join(dir, name), text);
}

/** A cgroup v2 tree: root, a cgroupfs pod with the container's cgroup, a systemd pod slice; /proc with pids 100 (the container) and 200 (elsewhere). */
function tree(t: Test) {
  const base = mkdtempSync(join(tmpdir(), "cridock-unified-"));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const root = join(base, "cgroup");
  const settings = { "memory.oom.group": "0\n", "memory.high": "max\n", "memory.min": "0\n", "memory.max": "max\n", "memory.swap.max": "max\n", "pids.max": "max\n", "cpu.weight": "100\n" };
  files(root, { "cgroup.controllers": "cpuset cpu io memory pids\n" });
  files(join(root, POD), { "cgroup.controllers": "cpu io memory pids\n", "cgroup.subtree_control": "cpu memory pids\n", ...settings, "io.max": "", "memory.current": "0\n" });
  chmodSync(join(root, POD, "memory.current"), 0o444);
  files(join(root, POD, ID), { "cgroup.controllers": "cpu memory pids\n", ...settings });
  files(join(root, SLICE), { "cgroup.controllers": "memory pids\n", "cgroup.subtree_control": "memory pids\n", ...settings });
  const proc = join(base, "proc");
  files(join(proc, "100"), { cgroup: `0::${POD}/${ID}\n` });
  files(join(proc, "200"), { cgroup: `0::${POD}/other\n` });
  const reader = new CgroupReader(root, proc, 2);
  return { root, dir: join(root, POD, ID), reader, cgroups: new UnifiedCgroups(reader) };
}

const read = (path: string) => readFileSync(path, "utf8");

t.test("the pod's cgroup: a systemd slice name expands to its path; a cgroupfs parent is a path", async (t) => {
  t.equal(sliceDir("kubepods-burstable-pod2.slice"), SLICE);
  t.equal(sliceDir("kubepods.slice"), "/kubepods.slice");
  t.equal(sliceDir("-.slice"), "/");
  for (const bad of ["kubepods", "a--b.slice", "-a.slice", "a-.slice", "a/b.slice", "../x.slice"]) t.equal(sliceDir(bad), undefined, bad);
  t.equal(parentPath("kubepods-burstable-pod2.slice", "systemd"), SLICE);
  t.equal(parentPath(POD, "cgroupfs"), POD);
  t.equal(parentPath("", "cgroupfs"), undefined);
  t.equal(parentPath("/kubepods/../../etc", "cgroupfs"), "/etc", "normalized from the root: never above it");
});

t.test("at create: each key's controller and interface file, against the pod's cgroup", async (t) => {
  const { cgroups } = tree(t);
  await cgroups.checkBeforeCreate(["memory.oom.group", "memory.swap.max", "memory.high", "pids.max"], POD, "cgroupfs");
  // io is in the pod's cgroup.controllers, not yet its subtree_control: runc enables it at the container's start.
  await cgroups.checkBeforeCreate(["io.max"], POD, "cgroupfs");
  await t.rejects(cgroups.checkBeforeCreate(["cpuset.cpus"], POD, "cgroupfs"), {
    code: "INVALID_ARGUMENT",
    message: /unified cpuset\.cpus: the cpuset controller is not available to the container's cgroup \(the pod's cgroup \/kubepods\/burstable\/pod1 offers: cpu io memory pids\)/,
  });
  await t.rejects(cgroups.checkBeforeCreate(["memory.nosuch"], POD, "cgroupfs"), { code: "INVALID_ARGUMENT", message: /memory\.nosuch is not an interface file/ });
  await t.rejects(cgroups.checkBeforeCreate(["memory.current"], POD, "cgroupfs"), { code: "INVALID_ARGUMENT", message: /memory\.current is a read-only file/ });
  // systemd: the slice name Docker was given, expanded.
  await cgroups.checkBeforeCreate(["memory.oom.group"], "kubepods-burstable-pod2.slice", "systemd");
  await t.rejects(cgroups.checkBeforeCreate(["cpu.weight"], "kubepods-burstable-pod2.slice", "systemd"), { code: "INVALID_ARGUMENT", message: /cpu\.weight/ });
  // No parent: the root's controllers.
  await cgroups.checkBeforeCreate(["cpuset.cpus"], "", "cgroupfs");
  await t.rejects(cgroups.checkBeforeCreate(["rdma.max"], "", "cgroupfs"), { code: "INVALID_ARGUMENT", message: /rdma\.max.*the cgroup root offers/ });
});

t.test("the container's own cgroup, from its init pid, and only its own", async (t) => {
  const { cgroups, dir } = tree(t);
  t.equal(await cgroups.containerDir(100, ID), dir);
  await t.rejects(cgroups.containerDir(200, ID), { code: "FAILED_PRECONDITION", message: /not the container's own/ }, "a reused pid's cgroup is refused");
  t.equal(await cgroups.containerDir(999, ID), undefined, "a process that is gone");
});

t.test("writes go into the container's cgroup, and a hostile key writes nothing anywhere", async (t) => {
  const { cgroups, dir, root } = tree(t);
  t.same(await cgroups.write(dir, { "memory.oom.group": "1", "memory.high": "104857600" }), { gone: false, previous: [] });
  t.equal(read(join(dir, "memory.oom.group")), "1");
  t.equal(read(join(dir, "memory.high")), "104857600");
  const before = () => [readdirSync(dir).sort(), readdirSync(join(root, POD)).sort(), read(join(root, POD, "memory.max")), read(join(root, "kubepods/burstable/pod1/memory.max"))];
  const snapshot = JSON.stringify(before());
  for (const key of ["../../memory.max", "memory.max/../x", "../memory.max", "..", "cgroup.procs", "/memory.max"]) {
    await t.rejects(cgroups.write(dir, { [key]: "1" }), { code: "INVALID_ARGUMENT" }, JSON.stringify(key));
  }
  await t.rejects(cgroups.write(dir, { "memory.high": "1\n2" }), { code: "INVALID_ARGUMENT" });
  t.equal(JSON.stringify(before()), snapshot, "no file created or changed");
});

t.test("a key the kernel has not got is INVALID_ARGUMENT naming key and value; undo restores what was written", async (t) => {
  const { cgroups, dir } = tree(t);
  await t.rejects(cgroups.write(dir, { "io.max": "8:0 rbps=1" }), {
    code: "INVALID_ARGUMENT",
    message: /unified io\.max="8:0 rbps=1": the io controller is not enabled in the container's cgroup \(it has: cpu memory pids\)/,
  });
  await t.rejects(cgroups.write(dir, { "memory.high": "5000000", "memory.nosuch": "1" }, true), {
    code: "INVALID_ARGUMENT",
    message: /memory\.nosuch="1": memory\.nosuch is not an interface file/,
  });
  t.equal(read(join(dir, "memory.high")), "max", "the earlier value is back");
  const written = await cgroups.write(dir, { "memory.high": "5000000" }, true);
  t.same(written.previous, [["memory.high", "max"]]);
  await cgroups.restore(dir, written.previous);
  t.equal(read(join(dir, "memory.high")), "max");
});

t.test("a container whose cgroup went away (it exited) is not an error of the keys", async (t) => {
  const { cgroups, dir } = tree(t);
  rmSync(dir, { recursive: true });
  t.same(await cgroups.write(dir, { "memory.oom.group": "1" }), { gone: true, previous: [] });
});

t.test("ContainerStatus reads back the keys it was given (plain file names only)", async (t) => {
  const { reader, dir } = tree(t);
  writeFileSync(join(dir, "memory.high"), "104857600\n");
  const limits = await readCgroupLimits(reader, 100, ["memory.high", "memory.oom.group", "../memory.max", "memory.nosuch"]);
  t.same(limits?.unified, { "memory.high": "104857600", "memory.oom.group": "0" });
});

function inspect(over: { running?: boolean; labels?: Record<string, string>; host?: Resources } = {}): ContainerInspect {
  return {
    Id: ID,
    Name: "/k8s_app_pod_ns_uid_0",
    State: { Status: over.running ? "running" : "created", ExitCode: 0, Running: Boolean(over.running), Pid: over.running ? 100 : 0 },
    Config: { Labels: { "io.kubernetes.docker.type": "container", ...over.labels }, Tty: false },
    HostConfig: { LogConfig: { Type: "json-file" }, ...over.host },
  } as unknown as ContainerInspect;
}

function manager(reader: CgroupReader) {
  const calls: string[] = [];
  const labels = { [UNIFIED_LABEL]: JSON.stringify({ "memory.oom.group": "1", "memory.swap.max": "0", "memory.high": "104857600" }) };
  let started = false;
  let extra: Record<string, string> = {};
  const docker = {
    // The client's event-checked inspect (ContainerStatus) is the same inspect here.
    inspectContainerCached: (id: string) => docker.inspectContainer(id),
    events: { announce: () => undefined },
    inspectContainer: async () => {
      calls.push("inspect");
      return inspect({ running: started, labels: { ...labels, ...extra }, host: { Memory: 128 << 20, MemorySwap: 128 << 20 } });
    },
    startContainer: async () => {
      calls.push("start");
      started = true;
    },
    killContainer: async () => void calls.push("kill"),
  } as unknown as DockerClient;
  const logs = { start: async () => void calls.push("logs") } as unknown as LogFollowers;
  const m = new ContainerManager({
    docker, logs, log: createLogger("silent" as never), cgroups: reader, logMaxSize: "10m", logMaxFile: 3,
    sandboxes: {} as ContainerManagerOptions["sandboxes"], images: {} as ContainerManagerOptions["images"], files: {} as ContainerManagerOptions["files"],
  });
  return { m, calls, setLabels: (l: Record<string, string>) => (extra = l) };
}

t.test("StartContainer writes the keys without a Docker field right after Docker's start", async (t) => {
  const { reader, dir } = tree(t);
  const { m, calls } = manager(reader);
  await m.start(ID);
  t.same(calls, ["inspect", "start", "inspect"], "one inspect for the pid between the start and the writes; no log path, no log writer");
  t.equal(read(join(dir, "memory.oom.group")), "1");
  t.equal(read(join(dir, "memory.high")), "104857600");
  t.equal(read(join(dir, "memory.swap.max")), "max\n", "swap went through Docker's MemorySwap, not the file");
});

t.test("a key the kernel refuses at start stops the container and fails the start", async (t) => {
  const { reader } = tree(t);
  const { m, calls, setLabels } = manager(reader);
  setLabels({ [UNIFIED_LABEL]: JSON.stringify({ "io.max": "8:0 rbps=1" }), "io.kubernetes.container.logpath": "/var/log/pods/x/0.log" });
  await t.rejects(m.start(ID), { code: "INVALID_ARGUMENT", message: /starting container c+: unified io\.max="8:0 rbps=1"/ });
  t.same(calls, ["inspect", "start", "inspect", "kill", "logs"], "killed, its output still copied");
});

t.test("StartContainer on cgroup v1 refuses keys without a Docker field before anything starts", async (t) => {
  const { root } = tree(t);
  const { m, calls } = manager(new CgroupReader(root, "/nonexistent", 1));
  await t.rejects(m.start(ID), { code: "UNIMPLEMENTED", message: /unified settings need cgroup v2; this node runs cgroup v1/ });
  t.same(calls, ["inspect"]);
});

t.test("UpdateContainerResources: files into the running container's cgroup, undone when Docker's update fails", async (t) => {
  const { reader, cgroups, dir } = tree(t);
  const updates: Resources[] = [];
  let fail = false;
  const docker = {
    updateContainer: async (_id: string, r: Resources) => {
      if (fail) throw new Error("docker said no");
      updates.push(r);
    },
  } as unknown as DockerClient;
  const resizer = new ContainerResizer(docker, reader, cgroups);
  const running = inspect({ running: true, host: { Memory: 128 << 20, MemorySwap: 128 << 20, OomScoreAdj: 0 } as Resources });
  await resizer.update(running, { ...EMPTY_RESOURCES, unified: { "memory.high": "209715200", "memory.oom.group": "1", "pids.max": "64" } });
  t.equal(read(join(dir, "memory.high")), "209715200");
  t.same(updates, [{ PidsLimit: 64 }]);
  fail = true;
  await t.rejects(resizer.update(running, { ...EMPTY_RESOURCES, unified: { "memory.high": "1", "pids.max": "32" } }), { code: "UNKNOWN", message: /docker said no/ });
  t.equal(read(join(dir, "memory.high")), "209715200", "the write was undone");
  await t.rejects(resizer.update(running, { ...EMPTY_RESOURCES, unified: { "cpuset.cpus": "0" } }), { code: "INVALID_ARGUMENT", message: /cpuset controller/ });
  await t.rejects(resizer.update(inspect(), { ...EMPTY_RESOURCES, unified: { "memory.high": "1" } }), { code: "FAILED_PRECONDITION", message: /not running/ });
  const status = await resizer.inForce(inspect({ running: true, labels: { [UNIFIED_LABEL]: JSON.stringify({ "memory.high": "1", "memory.oom.group": "1" }) } }));
  t.same(status.unified, { "memory.high": "209715200", "memory.oom.group": "1" }, "ContainerStatus: the values in force");
});

t.test("UpdateContainerResources: values systemd resets during Docker's update are written again", async (t) => {
  const { reader, cgroups, dir } = tree(t);
  // systemd applies the scope's properties anew on Docker's update (systemd driver) and puts its own values back.
  const docker = {
    updateContainer: async () => {
      writeFileSync(join(dir, "memory.oom.group"), "0\n");
      writeFileSync(join(dir, "memory.high"), "max\n");
    },
  } as unknown as DockerClient;
  const resizer = new ContainerResizer(docker, reader, cgroups);
  const labels = { [UNIFIED_LABEL]: JSON.stringify({ "memory.oom.group": "1", "memory.high": "104857600" }) };
  const running = inspect({ running: true, labels, host: { Memory: 128 << 20, MemorySwap: 128 << 20, OomScoreAdj: 0 } as Resources });
  writeFileSync(join(dir, "memory.oom.group"), "1\n");
  writeFileSync(join(dir, "memory.high"), "104857600\n");
  // A resize with no unified keys (crictl update): the creation-time values stay in force.
  await resizer.update(running, { ...EMPTY_RESOURCES, memoryLimitInBytes: 256n << 20n });
  t.equal(read(join(dir, "memory.oom.group")).trim(), "1", "memory.oom.group back to the container's 1");
  t.equal(read(join(dir, "memory.high")).trim(), "104857600", "memory.high back to its value before the update");
  // kubelet's resize, which sends its map again with a new memory.high.
  await resizer.update(running, { ...EMPTY_RESOURCES, memoryLimitInBytes: 300n << 20n, unified: { "memory.oom.group": "1", "memory.high": "209715200" } });
  t.equal(read(join(dir, "memory.oom.group")).trim(), "1");
  t.equal(read(join(dir, "memory.high")).trim(), "209715200", "the requested value, not the one held before");
});
