// What kubeadm's control plane met on this host, through a real kubelet:
// its static pods are node-critical (kubelet asks -997 for their
// oom_score_adj), which runc could not set where the bounding set lacks
// CAP_SYS_RESOURCE, so no container started; and kubelet recreated each
// container that could not start ~50 times a minute instead of backing off.
import t from "tap";
import { KubeletEnv, sleep } from "./harness/kubelet-env.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";
import { readOomScoreFacts } from "../../src/runtime/container/oom-score.ts";

const env = await KubeletEnv.start();
t.teardown(() => env.destroy());

// cridock runs as a child of this process: same bounding set, namespace and score.
const facts = await readOomScoreFacts();
const hostRestricted = !facts.sysResourceInBoundingSet || facts.inUserNamespace;
const expectedScore = hostRestricted ? Math.max(-997, facts.ownScore) : -997;

t.test("a node-critical Guaranteed pod (a control-plane pod's shape) runs", async (t) => {
  const resources = { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "100m", memory: "64Mi" } };
  await env.writePod({
    metadata: { name: "critical", namespace: "kube-system" },
    spec: {
      priorityClassName: "system-node-critical",
      hostNetwork: true,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sh", "-c", "cat /proc/self/oom_score_adj; sleep 3600"], resources }],
    },
  });
  const pod = await env.waitPod("critical", "running", (p) => (p.status.containerStatuses?.[0]?.state.running ? p : undefined), 90_000);
  const id = pod.status.containerStatuses![0]!.containerID!.replace("docker://", "");
  const inspect = JSON.parse(env.docker("inspect", id))[0];
  t.equal(inspect.HostConfig.OomScoreAdj ?? 0, expectedScore, `kubelet's -997 becomes ${expectedScore} here`);
  const logs = (await env.get(`/containerLogs/kube-system/${env.podName("critical")}/app`)).body;
  t.equal(logs.trim(), String(expectedScore), "the process runs with it");
  await env.deletePod("critical");
  await env.waitPodGone("critical");
});

t.test("a container that cannot start is backed off, not recreated at once", async (t) => {
  await env.writePod({
    metadata: { name: "cannotrun", namespace: "default" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["/no/such/binary"] }] },
  });
  const first = await env.waitPod("cannotrun", "a failed start", (p) => {
    const c = p.status.containerStatuses?.[0];
    return c && (c.restartCount > 0 || c.state.terminated || c.state.waiting?.reason === "CrashLoopBackOff") ? c : undefined;
  });
  t.ok(first, "kubelet saw the attempt end");
  // kubelet's back-off doubles from 10 s: in 40 s a handful of attempts. With the start
  // reported as not finished, kubelet made ~50 a minute.
  const observeMs = 40_000;
  await sleep(observeMs);
  const pod = await env.pod("cannotrun");
  const c = pod!.status.containerStatuses![0]!;
  t.ok(c.restartCount >= 1, `retried (${c.restartCount} restarts)`);
  // Measured here: 3 with the fix (both PLEG modes); 6 without, where kubelet's own sync-error
  // retries were all that slowed it (11 in 90 s for the critical pod above).
  t.ok(c.restartCount <= 4, `backed off: ${c.restartCount} restarts in about ${observeMs / 1000 + 10} s`);
  t.match(c.state.waiting?.reason ?? "", /^(CrashLoopBackOff|RunContainerError)$/, "waiting, with kubelet's reason");
  const last = (c.lastState as { terminated?: { reason: string; exitCode: number; finishedAt: string } } | undefined)?.terminated ?? c.state.terminated;
  t.notMatch(last?.finishedAt ?? "", /^1970-/, `finished at a real time (${last?.finishedAt}), which kubelet's back-off counts from`);
  t.equal(last?.reason, "ContainerCannotRun", "the last attempt's reason is Docker's");
  t.ok([127, 128].includes(last?.exitCode ?? 0), `its exit code (${last?.exitCode})`);
  await env.deletePod("cannotrun");
  await env.waitPodGone("cannotrun");
});

t.test("nothing is left behind", async (t) => {
  const leaks = await env.leaks();
  for (const [kind, items] of Object.entries(leaks)) t.same(items, [], kind);
});
