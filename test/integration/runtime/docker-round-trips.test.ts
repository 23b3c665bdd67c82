// How many Engine API round trips a CRI call costs, counted on a socket in
// front of the test engine: each one is a request written, an answer
// parsed, and dockerd's own work. A sandbox cridock checkpointed is known by
// its full id without a container list (CreateContainer, PodSandboxStatus);
// the pause container's inspect says whether it still exists. Status calls
// of unchanged containers cost none (the client's inspect cache).
import t, { type Test } from "tap";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { countDockerRequests, type DockerRequest } from "../../helpers/docker-request-counter.ts";
import { BUSYBOX_IMAGE, PAUSE_IMAGE, TEST_DOCKER_ENDPOINT } from "../../helpers/env.ts";

const lists = (r: DockerRequest[]) => r.filter((q) => q.method === "GET" && q.path === "/containers/json").length;
const inspectsOf = (r: DockerRequest[], id: string) => r.filter((q) => q.method === "GET" && q.path === `/containers/${id}/json`).length;

/** A cridock on a request-counting socket in front of the test engine, with one pod sandbox running (no network). */
async function countedPod(t: Test, name: string) {
  const counter = await countDockerRequests();
  t.teardown(() => counter.close());
  const logs = await mkdtemp(join(tmpdir(), "cridock-round-trips-"));
  t.teardown(() => rm(logs, { recursive: true, force: true }));
  const cridock = await startCridockProcess({
    flags: [`--docker-endpoint=${counter.endpoint}`, "--network-plugin=no-op", `--pod-infra-container-image=${PAUSE_IMAGE}`],
  });
  t.teardown(() => cridock.stop());
  const { client } = cridock;
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const config = { metadata: { name, namespace: "round-trips", uid: `${name}-${process.pid}`, attempt: 0 }, logDirectory: logs, linux: {} };
  const { podSandboxId: pod } = (await client.call("RunPodSandbox", { config })) as { podSandboxId: string };
  t.teardown(async () => {
    await client.call("StopPodSandbox", { podSandboxId: pod }).catch(() => undefined);
    await client.call("RemovePodSandbox", { podSandboxId: pod }).catch(() => undefined);
  });
  return { counter, client, config, pod };
}

t.test("a checkpointed sandbox is resolved by its full id without a container list", async (t) => {
  const { counter, client, config, pod } = await countedPod(t, "trips");

  // RunPodSandbox's create and start left the list cache cold: a list now would go to dockerd.
  let before = counter.requests().length;
  const { containerId } = await client.call("CreateContainer", {
    podSandboxId: pod,
    config: { metadata: { name: "c" }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "60"], linux: {} },
    sandboxConfig: config,
  });
  let during = counter.requests().slice(before);
  t.equal(lists(during), 0, "CreateContainer lists no containers");
  t.equal(inspectsOf(during, pod), 1, "it inspects the pause container once");
  t.same(
    during.map((q) => q.method + " " + q.path.replace(pod, "<pod>")),
    ["GET /containers/<pod>/json", `GET /images/${encodeURIComponent(BUSYBOX_IMAGE)}/json`, "POST /containers/create"],
    "its round trips: the sandbox, the image, the create",
  );

  before = counter.requests().length;
  const status = await client.call("PodSandboxStatus", { podSandboxId: pod });
  during = counter.requests().slice(before);
  t.equal(status.status.state, 0, "the sandbox is READY");
  t.same(during.map((q) => q.method + " " + q.path.replace(pod, "<pod>")), ["GET /containers/<pod>/json"], "PodSandboxStatus: one inspect, no list");

  // The pause container removed behind cridock's back: once Docker's destroy
  // event drops the kept inspect (this process relays the event stream, and
  // could not while the CLI ran), the inspect finds it gone.
  execFileSync("docker", ["-H", TEST_DOCKER_ENDPOINT, "rm", "-f", containerId, pod], { stdio: "ignore" });
  let gone = await client.call("PodSandboxStatus", { podSandboxId: pod });
  for (let i = 0; i < 50 && gone.status.state !== 1; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    gone = await client.call("PodSandboxStatus", { podSandboxId: pod });
  }
  t.equal(gone.status.state, 1, "a checkpointed sandbox whose pause container is gone is NOTREADY");
  // A prefix still resolves through the list.
  const byPrefix = await client.call("PodSandboxStatus", { podSandboxId: pod.slice(0, 12) });
  t.equal(byPrefix.status.id, pod, "a prefix of the id still finds the sandbox");
});

// kubelet asks ContainerStatus of every running container each time its log
// manager runs (every 10 s by default): on a quiet node those inspects were
// most of cridock's steady CPU. They come from memory while Docker's events
// show the container unchanged; a change cridock makes, or another client's,
// is seen all the same.
t.test("ContainerStatus of an unchanged container asks dockerd nothing; every change is still seen", async (t) => {
  const { counter, client, config, pod } = await countedPod(t, "steady");
  const start = async (name: string) => {
    const { containerId } = await client.call("CreateContainer", {
      podSandboxId: pod,
      config: { metadata: { name }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "60"], logPath: `${name}.log`, linux: {} },
      sandboxConfig: config,
    });
    await client.call("StartContainer", { containerId });
    return containerId as string;
  };
  const status = async (id: string) => (await client.call("ContainerStatus", { containerId: id })).status;
  const inspectsFor = async (id: string) => {
    const before = counter.requests().length;
    await status(id);
    return inspectsOf(counter.requests().slice(before), id);
  };

  const a = await start("a");
  // The start's own events may still be on their way and drop the first answers kept.
  let settled = false;
  for (let i = 0; i < 20 && !settled; i++) {
    settled = (await inspectsFor(a)) === 0;
    if (!settled) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.ok(settled, "a ContainerStatus came from memory within 2 s of the start");
  let asked = 0;
  for (let i = 0; i < 5; i++) asked += await inspectsFor(a);
  t.equal(asked, 0, "five more ContainerStatus calls: no inspect of the container");
  t.equal((await status(a)).state, 1, "it is RUNNING");

  await client.call("StopContainer", { containerId: a, timeout: 0 });
  t.equal((await status(a)).state, 2, "right after cridock's own StopContainer: EXITED");

  const b = await start("b");
  for (let i = 0; i < 20 && (await inspectsFor(b)) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
  execFileSync("docker", ["-H", TEST_DOCKER_ENDPOINT, "kill", b], { stdio: "ignore" });
  let state = (await status(b)).state;
  for (let i = 0; i < 50 && state !== 2; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = (await status(b)).state;
  }
  t.equal(state, 2, "a kill by another Docker client is seen (its die event drops the kept inspect)");
});

// What kubelet asks of a quiet node: the PLEG's relist every second, the pod
// and container status of its syncs, the stats of its Summary API and
// eviction manager, the runtime's status and version, the image
// filesystem. A node of 110 pods makes these calls all day; answered from
// the list snapshot, the inspect cache, the cached info and the cgroup
// files, they cost dockerd nothing (issue 41's steady CPU relies on it;
// until this test, each ListContainerStats made the stats forget every
// pause container, and the next pod stats inspected each again). The
// one request allowed is the list snapshot's refetch when it is 10 s old,
// the safety net against a missed event (list-cache.ts).
t.test("kubelet's steady calls ask dockerd nothing but the list snapshot's 10 s refetch", async (t) => {
  const { counter, client, config, pod } = await countedPod(t, "quiet");
  const { containerId } = await client.call("CreateContainer", {
    podSandboxId: pod,
    config: { metadata: { name: "app" }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "600"], logPath: "app.log", linux: {} },
    sandboxConfig: config,
  });
  await client.call("StartContainer", { containerId });
  const calls: [string, object, "image"?][] = [
    ["ListPodSandbox", {}],
    ["ListContainers", {}],
    ["PodSandboxStatus", { podSandboxId: pod }],
    ["ContainerStatus", { containerId }],
    ["ListContainerStats", {}],
    ["ListPodSandboxStats", {}],
    ["PodSandboxStats", { podSandboxId: pod }],
    ["ContainerStats", { containerId }],
    ["Status", {}],
    ["Version", {}],
    ["ImageFsInfo", {}, "image"],
  ];
  // Whether each ListPodSandboxStats gave the pod a CPU rate (it needs the pause container's previous sample).
  const cpuRates: boolean[] = [];
  const round = async () => {
    const before = counter.requests().length;
    for (const [method, request, service] of calls) {
      const answer = await (service === "image" ? client.imageCall(method, request) : client.call(method, request));
      if (method === "ListPodSandboxStats") {
        const mine = (answer as { stats: { attributes: { id: string }; linux?: { cpu?: { usageNanoCores?: unknown } } }[] }).stats.find((s) => s.attributes.id === pod);
        cpuRates.push(mine?.linux?.cpu?.usageNanoCores != null);
      }
    }
    return counter.requests().slice(before);
  };
  // The start's own events drop the snapshot and kept inspects; the first stats calls inspect once per container.
  let settled = false;
  for (let i = 0; i < 50 && !settled; i++) {
    settled = (await round()).length === 0;
    if (!settled) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.ok(settled, "within 5 s of the start a whole round of kubelet's calls asks dockerd nothing");

  const started = Date.now();
  cpuRates.length = 0;
  const asked: DockerRequest[] = [];
  for (let i = 0; i < 12; i++) {
    asked.push(...(await round()));
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const seconds = (Date.now() - started) / 1000;
  const other = asked.filter((q) => !(q.method === "GET" && q.path === "/containers/json"));
  t.same(other.map((q) => `${q.method} ${q.path}`), [], `${calls.length} kinds of call each second for ${seconds.toFixed(0)} s: no request but lists`);
  t.ok(lists(asked) <= Math.ceil(seconds / 10), `lists: ${lists(asked)}, at most one per 10 s of snapshot age`);
  t.same(cpuRates, cpuRates.map(() => true), "every ListPodSandboxStats gave the pod its CPU rate, though ListContainerStats ran in between");
});
