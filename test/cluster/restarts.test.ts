// kubelet and cridock restarted under a running cluster: the API stays
// served, and no container restarts or is replaced (cridock rebuilds its
// view from Docker; kubelet finds every pod as it left it).
import t from "tap";
import { join } from "node:path";
import { apply, getJson, kubectlOk, run, testNamespace, waitFor, waitPodReady, NODE_NAME } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const CLUSTER_SH = join(import.meta.dirname, "..", "..", "scripts", "cluster.sh");
const ns = await testNamespace(t, "restarts");
await apply(ns, {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "survivor" },
  spec: {
    terminationGracePeriodSeconds: 1,
    // On the node whose kubelet and cridock restart, when the cluster has two.
    nodeSelector: { "kubernetes.io/hostname": NODE_NAME },
    containers: [{ name: "c", image: BUSYBOX_IMAGE, command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"] }],
  },
});
await waitPodReady(ns, "survivor");

/** Every container of the kube-system pods and the test pod: id and restart count. */
async function containers(): Promise<Record<string, string>> {
  const pods = await getJson(["pods", "--all-namespaces", "--field-selector", `spec.nodeName=${NODE_NAME}`]);
  const seen: Record<string, string> = {};
  for (const pod of pods.items) {
    if (pod.metadata.namespace !== "kube-system" && pod.metadata.namespace !== ns) continue;
    for (const c of pod.status.containerStatuses ?? []) seen[`${pod.metadata.namespace}/${pod.metadata.name}/${c.name}`] = `${c.containerID} restarts=${c.restartCount}`;
  }
  return seen;
}

const nodeReady = async () => {
  const node = await getJson(["node", NODE_NAME]);
  return node.status.conditions.find((c: any) => c.type === "Ready")?.status === "True" ? true : undefined;
};

for (const daemon of ["kubelet", "cridock"]) {
  t.test(`a restart of ${daemon} restarts no container`, async (t) => {
    const before = await containers();
    const res = await run("bash", [CLUSTER_SH, "restart", daemon], { timeoutMs: 120_000 });
    t.equal(res.code, 0, res.stderr);
    await waitFor("the node Ready again", nodeReady, 120_000);
    // Give kubelet a few sync loops to notice anything it would restart.
    await new Promise((r) => setTimeout(r, 20_000));
    await waitFor("the node Ready after the settling time", nodeReady, 60_000);
    t.same(await containers(), before, "every container id and restart count unchanged");
    t.match(await kubectlOk(["get", "--raw", "/readyz"]), "ok", "the API server is served");
    t.equal((await getJson(["-n", ns, "pod", "survivor"])).status.phase, "Running");
  });
}
