// How many Engine API round trips a CRI call costs, counted on a socket in
// front of the test engine: each one is a request written, an answer
// parsed, and dockerd's own work. A sandbox cridock checkpointed is known by
// its full id without a container list (CreateContainer, PodSandboxStatus);
// the pause container's inspect says whether it still exists.
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { countDockerRequests, type DockerRequest } from "../../helpers/docker-request-counter.ts";
import { BUSYBOX_IMAGE, PAUSE_IMAGE, TEST_DOCKER_ENDPOINT } from "../../helpers/env.ts";

const lists = (r: DockerRequest[]) => r.filter((q) => q.method === "GET" && q.path === "/containers/json").length;
const inspectsOf = (r: DockerRequest[], id: string) => r.filter((q) => q.method === "GET" && q.path === `/containers/${id}/json`).length;

t.test("a checkpointed sandbox is resolved by its full id without a container list", async (t) => {
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
  const config = { metadata: { name: "trips", namespace: "round-trips", uid: `trips-${process.pid}`, attempt: 0 }, logDirectory: logs, linux: {} };
  const { podSandboxId: pod } = await client.call("RunPodSandbox", { config });
  t.teardown(async () => {
    await client.call("StopPodSandbox", { podSandboxId: pod }).catch(() => undefined);
    await client.call("RemovePodSandbox", { podSandboxId: pod }).catch(() => undefined);
  });

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

  // The pause container removed behind cridock's back: the inspect finds it gone.
  execFileSync("docker", ["-H", TEST_DOCKER_ENDPOINT, "rm", "-f", containerId, pod], { stdio: "ignore" });
  const gone = await client.call("PodSandboxStatus", { podSandboxId: pod });
  t.equal(gone.status.state, 1, "a checkpointed sandbox whose pause container is gone is NOTREADY");
  // A prefix still resolves through the list.
  const byPrefix = await client.call("PodSandboxStatus", { podSandboxId: pod.slice(0, 12) });
  t.equal(byPrefix.status.id, pod, "a prefix of the id still finds the sandbox");
});
