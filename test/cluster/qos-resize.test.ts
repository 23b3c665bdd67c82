// kubelet's QoS cgroups on cridock (cgroupsPerQOS, the cgroupfs driver): a
// pod's sandbox and every container sit in the pod cgroup kubelet made
// (kubepods/pod<uid>, kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>),
// pod-level resources bound that pod cgroup, and an in-place resize reaches
// the container's own cgroup and the pod's without a restart.
import t from "tap";
import { readFile } from "node:fs/promises";
import { apply, docker, getJson, kubectlOk, testNamespace, waitFor, waitPodReady, NODE_NAME } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "qos");
const idle = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"];
const MI = 1024 * 1024;
// The first node: its dockerd and cgroup root are the ones this file reads (a second node has its own).
const onFirstNode = { nodeSelector: { "kubernetes.io/hostname": NODE_NAME } };

/** The cgroup v1 controller directories this host mounts (cgroupfs driver: one tree per controller). */
const CPU_ROOT = "/sys/fs/cgroup/cpu";
const MEMORY_ROOT = "/sys/fs/cgroup/memory";

interface DockerContainer {
  Id: string;
  State: { Pid: number };
  HostConfig: { CgroupParent: string };
}

async function inspect(id: string): Promise<DockerContainer> {
  const res = await docker(["inspect", id]);
  if (res.code !== 0) throw new Error(`docker inspect ${id}: ${res.stderr.trim()}`);
  const [found] = JSON.parse(res.stdout) as DockerContainer[];
  if (!found) throw new Error(`docker inspect ${id} returned nothing`);
  return found;
}

/** The pod's sandbox (pause) container and its app containers, as the cluster's dockerd has them. */
async function podContainers(pod: any): Promise<{ sandbox: DockerContainer; containers: Map<string, DockerContainer> }> {
  const uid = pod.metadata.uid as string;
  const ids = await docker(["ps", "-q", "--no-trunc", "--filter", `label=io.kubernetes.pod.uid=${uid}`, "--filter", "label=io.kubernetes.docker.type=podsandbox"]);
  const sandboxIds = ids.stdout.trim().split("\n").filter(Boolean);
  const [sandboxId] = sandboxIds;
  if (sandboxIds.length !== 1 || !sandboxId) throw new Error(`expected one running sandbox of pod ${uid}, found ${JSON.stringify(sandboxIds)}`);
  const containers = new Map<string, DockerContainer>();
  for (const status of pod.status.containerStatuses as any[]) {
    containers.set(status.name, await inspect(String(status.containerID).replace(/^docker:\/\//, "")));
  }
  return { sandbox: await inspect(sandboxId), containers };
}

/** The memory controller's cgroup of a process, from /proc/<pid>/cgroup. */
async function memoryCgroup(pid: number): Promise<string> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, "utf8")).split("\n");
  const line = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  if (!line) throw new Error(`process ${pid} has no memory cgroup line: ${lines.join(" | ")}`);
  return line.slice(line.lastIndexOf(":") + 1);
}

const readNumber = async (path: string) => Number((await readFile(path, "utf8")).trim());

t.test("every container of a pod, the sandbox too, is in the pod cgroup of its QoS class", async (t) => {
  const pods = [
    { name: "guaranteed", parent: (uid: string) => `/kubepods/pod${uid}`, resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "100m", memory: "64Mi" } } },
    { name: "burstable", parent: (uid: string) => `/kubepods/burstable/pod${uid}`, resources: { requests: { cpu: "50m", memory: "32Mi" } } },
    { name: "besteffort", parent: (uid: string) => `/kubepods/besteffort/pod${uid}`, resources: {} },
  ];
  for (const p of pods) {
    await apply(ns, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: p.name },
      spec: {
        ...onFirstNode,
      terminationGracePeriodSeconds: 1,
        containers: ["one", "two"].map((name) => ({ name, image: BUSYBOX_IMAGE, command: idle, resources: p.resources })),
      },
    });
  }
  for (const p of pods) {
    const pod = await waitPodReady(ns, p.name);
    const uid = pod.metadata.uid as string;
    t.equal(pod.status.qosClass.toLowerCase(), p.name, `${p.name} is of the QoS class its name says`);
    const parent = p.parent(uid);
    const { sandbox, containers } = await podContainers(pod);
    t.equal(sandbox.HostConfig.CgroupParent, parent, `${p.name}: the sandbox's cgroup parent is the pod cgroup`);
    t.equal(await memoryCgroup(sandbox.State.Pid), `${parent}/${sandbox.Id}`, `${p.name}: the pause process runs in it`);
    for (const [name, c] of containers) {
      t.equal(c.HostConfig.CgroupParent, parent, `${p.name}/${name}: the container's cgroup parent is the pod cgroup`);
      t.equal(await memoryCgroup(c.State.Pid), `${parent}/${c.Id}`, `${p.name}/${name}: its process runs in it`);
    }
  }
  // A Guaranteed pod's cgroup is bounded by the sum of its containers' limits (kubelet sets it; Docker's containers inherit it).
  const guaranteed = await getJson(["-n", ns, "pod", "guaranteed"]);
  t.equal(await readNumber(`${MEMORY_ROOT}/kubepods/pod${guaranteed.metadata.uid}/memory.limit_in_bytes`), 128 * MI);
});

t.test("pod-level resources bound the pod cgroup", async (t) => {
  await apply(ns, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "pod-level" },
    spec: {
      ...onFirstNode,
      terminationGracePeriodSeconds: 1,
      resources: { requests: { cpu: "100m", memory: "96Mi" }, limits: { cpu: "200m", memory: "96Mi" } },
      containers: [{ name: "app", image: BUSYBOX_IMAGE, command: idle }],
    },
  });
  const pod = await waitPodReady(ns, "pod-level");
  const uid = pod.metadata.uid as string;
  const { containers } = await podContainers(pod);
  const app = containers.get("app")!;
  t.equal(app.HostConfig.CgroupParent, `/kubepods/burstable/pod${uid}`);
  t.equal(await readNumber(`${MEMORY_ROOT}/kubepods/burstable/pod${uid}/memory.limit_in_bytes`), 96 * MI, "the pod's memory limit");
  t.equal(await readNumber(`${CPU_ROOT}/kubepods/burstable/pod${uid}/cpu.cfs_quota_us`), 20_000, "the pod's CPU limit (200m of a 100 ms period)");
});

t.test("an in-place resize reaches the container's cgroup and the pod's, with no restart", async (t) => {
  const resources = (cpu: string, memory: string) => ({ requests: { cpu, memory }, limits: { cpu, memory } });
  await apply(ns, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "resized" },
    spec: {
      ...onFirstNode,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "app",
          image: BUSYBOX_IMAGE,
          command: idle,
          resources: resources("100m", "64Mi"),
          resizePolicy: [
            { resourceName: "cpu", restartPolicy: "NotRequired" },
            { resourceName: "memory", restartPolicy: "NotRequired" },
          ],
        },
      ],
    },
  });
  const before = await waitPodReady(ns, "resized");
  const uid = before.metadata.uid as string;
  const beforeId = before.status.containerStatuses[0].containerID;
  const patch = { spec: { containers: [{ name: "app", resources: resources("200m", "96Mi") }] } };
  await kubectlOk(["-n", ns, "patch", "pod", "resized", "--subresource", "resize", "--type", "strategic", "-p", JSON.stringify(patch)]);
  const after = await waitFor(
    "the resize to be done",
    async () => {
      const pod = await getJson(["-n", ns, "pod", "resized"]);
      const status = pod.status.containerStatuses[0];
      const resizing = (pod.status.conditions ?? []).some((c: any) => /^PodResize/.test(c.type));
      return !resizing && status.resources?.limits?.cpu === "200m" && status.resources?.limits?.memory === "96Mi" ? pod : undefined;
    },
    120_000,
  );
  const status = after.status.containerStatuses[0];
  t.equal(status.containerID, beforeId, "the same container");
  t.equal(status.restartCount, 0, "not restarted");
  const app = (await podContainers(after)).containers.get("app")!;
  const own = `kubepods/pod${uid}/${app.Id}`;
  t.equal(await readNumber(`${CPU_ROOT}/${own}/cpu.cfs_quota_us`), 20_000, "the container's CPU quota");
  t.equal(await readNumber(`${MEMORY_ROOT}/${own}/memory.limit_in_bytes`), 96 * MI, "the container's memory limit");
  t.equal(await readNumber(`${CPU_ROOT}/kubepods/pod${uid}/cpu.cfs_quota_us`), 20_000, "the pod's CPU quota");
  t.equal(await readNumber(`${MEMORY_ROOT}/kubepods/pod${uid}/memory.limit_in_bytes`), 96 * MI, "the pod's memory limit");
});
