// The cluster kubeadm built on cridock, as the API server sees it: the
// control plane runs as static pods on cridock, and the node reports
// cridock's runtime, its images and its pods' IPs.
import t from "tap";
import { crictl, docker, getJson, kubectlOk, NODE_NAME, run, CLUSTER_BIN_DIR } from "./harness/cluster.ts";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { KUBERNETES_VERSION } from "../helpers/env.ts";

const node = await getJson(["node", NODE_NAME]);

t.test("the node is Ready, with capacity and allocatable", async (t) => {
  const ready = node.status.conditions.find((c: any) => c.type === "Ready");
  t.equal(ready?.status, "True", `Ready: ${ready?.reason} ${ready?.message}`);
  for (const field of ["capacity", "allocatable"]) {
    t.match(node.status[field].cpu, /^\d+m?$/, `${field}.cpu`);
    t.match(node.status[field].memory, /^\d+Ki$/, `${field}.memory`);
    t.ok(Number(node.status[field].pods) > 0, `${field}.pods`);
  }
});

t.test("containerRuntimeVersion is docker://<the engine's version>, as cri-dockerd reports it", async (t) => {
  const engine = await docker(["version", "--format", "{{.Server.Version}}"]);
  t.equal(engine.code, 0, engine.stderr);
  t.equal(node.status.nodeInfo.containerRuntimeVersion, `docker://${engine.stdout.trim()}`);
  const kubelet = await run(join(CLUSTER_BIN_DIR, "kubelet"), ["--version"]);
  t.equal(`Kubernetes ${node.status.nodeInfo.kubeletVersion}`, kubelet.stdout.trim());
});

t.test("status.images lists the control plane's images with sizes", async (t) => {
  const names = node.status.images.flatMap((i: any) => i.names as string[]);
  for (const image of ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns/coredns"]) {
    t.ok(names.some((n: string) => n.startsWith(`registry.k8s.io/${image}:`)), `${image} is listed`);
  }
  t.ok(node.status.images.every((i: any) => i.sizeBytes > 0), "every image has a size");
});

t.test("the control plane runs as static pods on cridock", async (t) => {
  const pods = await getJson(["-n", "kube-system", "pods"]);
  const listed = await crictl(["ps", "-o", "json"]);
  t.equal(listed.code, 0, listed.stderr);
  const criIds = new Set((JSON.parse(listed.stdout).containers as any[]).map((c) => c.id));
  for (const component of ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]) {
    const pod = pods.items.find((p: any) => p.metadata.name === `${component}-${NODE_NAME}`);
    t.ok(pod, `${component} is a pod`);
    if (!pod) continue;
    t.equal(pod.metadata.annotations?.["kubernetes.io/config.source"], "file", `${component} is a static pod`);
    t.equal(pod.status.phase, "Running", `${component} is Running`);
    const status = pod.status.containerStatuses[0];
    t.ok(status.ready, `${component} is ready`);
    t.match(status.containerID, /^docker:\/\/[0-9a-f]{64}$/, `${component}'s container id is Docker's`);
    t.ok(criIds.has(status.containerID.slice("docker://".length)), `${component}'s container is running on cridock`);
  }
  for (const app of ["kube-proxy", "kube-dns"]) {
    const running = pods.items.filter((p: any) => p.metadata.labels?.["k8s-app"] === app && p.status.phase === "Running");
    t.ok(running.length > 0, `${app} runs`);
  }
});

t.test("pod IPs in the API match the sandboxes' IPs in cridock", async (t) => {
  const pods = await getJson(["pods", "--all-namespaces", "--field-selector", `spec.nodeName=${NODE_NAME},status.phase=Running`]);
  const podNetwork = pods.items.filter((p: any) => !p.spec.hostNetwork);
  t.ok(podNetwork.length > 0, "some running pod is on the pod network (CoreDNS at least)");
  for (const pod of podNetwork) {
    const found = await crictl(["pods", "--name", pod.metadata.name, "--namespace", pod.metadata.namespace, "--state", "ready", "-q"]);
    const ids = found.stdout.trim().split("\n").filter(Boolean);
    t.equal(ids.length, 1, `one ready sandbox for ${pod.metadata.name}`);
    const inspected = JSON.parse((await crictl(["inspectp", ids[0]!])).stdout);
    t.equal(inspected.status.network.ip, pod.status.podIP, `${pod.metadata.namespace}/${pod.metadata.name}`);
  }
});

/** Whether IPv4 `ip` lies in `cidr`. */
function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split("/");
  const toNumber = (a: string) => a.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toNumber(ip) / size) === Math.floor(toNumber(base!) / size);
}

t.test("pod IPs come from the node's pod CIDR, which kubelet passed to cridock", async (t) => {
  // scripts/k8s/cluster-config.sh: the config names no range, so the range can only be kubelet's.
  const conflist = JSON.parse(await readFile("/var/lib/cridock-cluster/cni/net.d/10-cluster.conflist", "utf8"));
  const bridge = conflist.plugins.find((p: any) => p.type === "bridge");
  t.same(bridge.capabilities, { ipRanges: true }, "the bridge plugin takes ipRanges");
  t.notOk(bridge.ipam.ranges ?? bridge.ipam.subnet, "its IPAM names no range of its own");
  const cidr: string = node.spec.podCIDR;
  t.match(cidr, /^10\.113\.\d+\.0\/24$/, "the controller manager gave the node a /24 of the pod subnet");
  const pods = await getJson(["pods", "--all-namespaces", "--field-selector", `spec.nodeName=${NODE_NAME},status.phase=Running`]);
  const podNetwork = pods.items.filter((p: any) => !p.spec.hostNetwork);
  t.ok(podNetwork.length > 0, "some running pod is on the pod network");
  for (const pod of podNetwork) t.ok(inCidr(pod.status.podIP, cidr), `${pod.metadata.name}'s IP ${pod.status.podIP} is in ${cidr}`);
});

t.test("the API server's version is the built one", async (t) => {
  const version = JSON.parse(await kubectlOk(["version", "-o", "json"]));
  t.equal(version.serverVersion.gitVersion, KUBERNETES_VERSION);
  t.equal(version.clientVersion.gitVersion, KUBERNETES_VERSION);
});
