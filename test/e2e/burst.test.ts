// A burst of 30 static pods: all Running, then all deleted and garbage
// collected with nothing leaked (containers, netns handles and mounts,
// checkpoints, veths, IPs).
import t from "tap";
import { KubeletEnv, sleep } from "./harness/kubelet-env.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const PODS = 30;
const env = await KubeletEnv.start();
t.teardown(() => env.destroy());

t.test(`${PODS} pods at once: all Running, then all gone`, async (t) => {
  const names = Array.from({ length: PODS }, (_, i) => `burst-${i}`);
  const started = Date.now();
  await Promise.all(
    names.map((name) =>
      env.writePod({
        metadata: { name, namespace: "default" },
        spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sleep", "3600"] }] },
      }),
    ),
  );
  const deadline = Date.now() + 240_000;
  let running = 0;
  while (Date.now() < deadline) {
    const pods = await env.pods();
    running = pods.filter((p) => (p.status.containerStatuses ?? []).some((c) => c.ready && c.state.running)).length;
    if (running === PODS) break;
    await sleep(1000);
  }
  t.equal(running, PODS, `all ${PODS} pods Running after ${Math.round((Date.now() - started) / 1000)} s`);
  const ips = new Set((await env.pods()).map((p) => p.status.podIP));
  t.equal(ips.size, PODS, "each pod has its own IP");

  // Version and Status must answer fast whatever else runs: sampled all through the deletion.
  let worst = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const at = performance.now();
      await env.cridock.client.call("Version", {});
      await env.cridock.client.call("Status", {});
      worst = Math.max(worst, performance.now() - at);
      await sleep(50);
    }
  })();
  for (const name of names) await env.deletePod(name);
  while ((await env.runningPodContainers()) > 0) await sleep(500);
  sampling = false;
  await sampler;
  // From memory they never wait for dockerd; what is left is the 2-core
  // machine's CPU, shared with dockerd, kubelet and 30 teardowns (seen: 0.2 s
  // evented, 0.6 s generic). Waiting for a Docker connection took seconds.
  t.ok(worst < 1000, `Version + Status answered within ${worst.toFixed(1)} ms all through the deletion of ${PODS} pods`);
  const gcDeadline = Date.now() + 180_000;
  let leaks = await env.leaks();
  while (Object.values(leaks).some((l) => l.length > 0) && Date.now() < gcDeadline) {
    await sleep(2000);
    leaks = await env.leaks();
  }
  t.same(leaks, { containers: [], netnsMounts: [], netnsHandles: [], checkpoints: [], veths: [], ips: [] }, "nothing is left");
  const logs = env.kubeletLogs();
  t.notMatch(logs, /CreatedAt is not set/, "kubelet never saw a sandbox without created_at");
  // Standalone kubelet asks Version on every pod status update (initialNode →
  // setNodeStatus) with the pod worker's context, which it cancels itself
  // when the pod is deleted: a call in flight then fails "context canceled"
  // however fast cridock answers. Reported, not asserted.
  const cancelled = logs.split("\n").filter((l) => l.includes("Version from runtime service failed")).length;
  t.comment(`kubelet logged ${cancelled} Version calls cancelled by its own pod workers`);
});
