// The two-node cluster of `scripts/cluster.sh up --nodes 2`: the second node
// (scripts/k8s/cluster-node2.sh) runs its own dockerd, cridock and kubelet in
// namespaces of its own. Pods on the two nodes reach each other without NAT,
// a pod on node 2 reaches a Service whose backend is on node 1 and resolves
// names through CoreDNS (which runs on node 1), and a DaemonSet runs a pod on
// each node, each on its own node's cridock. Node 2 refuses traffic to a
// ClusterIP port no Service serves, from its pods and its own namespace, as
// node 1 does (test/cluster/networking.test.ts).
//
// With one node the file is skipped, naming why; it fails instead when the
// run asked for two (CRIDOCK_CLUSTER_NODES=2) and the cluster has one.
import t from "tap";
import { apply, crictl, getJson, kubectl, kubectlOk, run, testNamespace, unservedPortRefused, waitFor, waitPodReady, DNS_DOMAIN, NODE_NAME } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE, CRICTL, CURL_IMAGE, HTTPD_IMAGE } from "../helpers/env.ts";

/** scripts/k8s/cluster-node2.sh: NODE2_NAME, NODE2_CRI_SOCKET, NODE2_DOCKER_SOCKET, NODE2_CGROUP_ROOT. */
const NODE2_NAME = `${NODE_NAME}-2`;
const NODE2_CRI_ENDPOINT = "unix:///run/cridock-node2/cridock.sock";
const NODE2_DOCKER_ENDPOINT = "unix:///run/cridock-node2/docker.sock";
const NODE2_CGROUP_ROOT = "/cridock-node2";
const NODE2_NETNS = "cridock-node2";
const INDEX = "cridock test httpd";

function node2Crictl(args: string[]) {
  return run(CRICTL, ["--runtime-endpoint", NODE2_CRI_ENDPOINT, "--timeout", "10s", ...args]);
}

const sleeper = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"];

/** A pod pinned to a node through the scheduler (the node's hostname label). */
function pinned(name: string, node: string, container: object, labels: Record<string, string> = {}) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels },
    spec: { terminationGracePeriodSeconds: 1, nodeSelector: { "kubernetes.io/hostname": node }, containers: [container] },
  };
}

async function twoNodes() {
  const ns = await testNamespace(t, "twonodes");
  const httpd = { name: "httpd", image: HTTPD_IMAGE, ports: [{ containerPort: 80 }], readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 1 } };
  const curl = { name: "curl", image: CURL_IMAGE, command: sleeper };
  await apply(
    ns,
    pinned("web1", NODE_NAME, httpd, { app: "web1" }),
    pinned("web2", NODE2_NAME, httpd, { app: "web2" }),
    pinned("client1", NODE_NAME, curl),
    pinned("client2", NODE2_NAME, curl),
    { apiVersion: "v1", kind: "Service", metadata: { name: "web1" }, spec: { selector: { app: "web1" }, ports: [{ port: 8080, targetPort: 80 }] } },
  );
  const pods: Record<string, any> = {};
  for (const name of ["web1", "web2", "client1", "client2"]) pods[name] = await waitPodReady(ns, name);

  /** curl from a client pod, retried while routes, endpoints and rules settle. */
  const fetchFrom = (pod: string, url: string) =>
    waitFor(`${pod} to fetch ${url}`, async () => {
      const res = await kubectl(["-n", ns, "exec", pod, "--", "curl", "-sf", "--max-time", "5", url]);
      return res.code === 0 ? res.stdout : undefined;
    }, 90_000);

  t.test("the pods landed where they were pinned, with IPs from their nodes' pod CIDRs", async (t) => {
    const node2 = await getJson(["node", NODE2_NAME]);
    const node1 = await getJson(["node", NODE_NAME]);
    t.not(node2.spec.podCIDR, node1.spec.podCIDR, "each node has its own pod CIDR");
    for (const [name, node] of [["web1", node1], ["client1", node1], ["web2", node2], ["client2", node2]] as const) {
      t.equal(pods[name].spec.nodeName, node.metadata.name, `${name} runs on ${node.metadata.name}`);
      const prefix = node.spec.podCIDR.replace(/\.0\/24$/, ".");
      t.ok(pods[name].status.podIP.startsWith(prefix), `${name}'s IP ${pods[name].status.podIP} is in ${node.spec.podCIDR}`);
    }
    const onNode2 = await node2Crictl(["pods", "--name", "web2", "--namespace", ns, "--state", "ready", "-q"]);
    t.equal(onNode2.stdout.trim().split("\n").filter(Boolean).length, 1, "web2's sandbox is on node 2's cridock");
    const onNode1 = await crictl(["pods", "--name", "web2", "--namespace", ns, "-q"]);
    t.equal(onNode1.stdout.trim(), "", "and not on node 1's");
  });

  t.test("pods on the two nodes reach each other by pod IP and see each other's pod IP", async (t) => {
    // busybox httpd -v logs each request as "[::ffff:<client ip>]:<port>: response:200".
    for (const [client, server] of [["client2", "web1"], ["client1", "web2"]] as const) {
      t.match(await fetchFrom(client, `http://${pods[server].status.podIP}/`), INDEX, `${client} fetches from ${server} across the nodes`);
      const logs = await kubectlOk(["-n", ns, "logs", server]);
      t.ok(logs.includes(`:${pods[client].status.podIP}]:`), `${server} saw ${client}'s own IP ${pods[client].status.podIP}, not a NAT address:\n${logs}`);
    }
  });

  t.test("a ClusterIP Service with its backend on node 1 answers a pod on node 2", async (t) => {
    const service = await getJson(["-n", ns, "service", "web1"]);
    t.match(await fetchFrom("client2", `http://${service.spec.clusterIP}:8080/`), INDEX, "by ClusterIP");
    t.match(await fetchFrom("client2", `http://web1.${ns}.svc.${DNS_DOMAIN}:8080/`), INDEX, "by DNS name");
  });

  t.test("node 2 refuses a ClusterIP port no Service serves, from a pod and from its own namespace", async (t) => {
    const service = await getJson(["-n", ns, "service", "web1"]);
    const ip: string = service.spec.clusterIP;
    // Its rule answers before the packet leaves node 2; node 1's would refuse it too, on the way out.
    await unservedPortRefused(t, "from a pod on node 2", ip, 81, (args) => kubectl(["-n", ns, "exec", "client2", "--", ...args]));
    await unservedPortRefused(t, "from node 2's namespace", ip, 81, (args) => run("ip", ["netns", "exec", NODE2_NETNS, ...args]));
    const rules = await run("ip", ["netns", "exec", NODE2_NETNS, "iptables-save", "-t", "filter"]);
    t.match(rules.stdout, /-A CNI-ADMIN -d \S+ -j CRIDOCK-SERVICE-REJECT/, "node 2's own chain is reached from its CNI-ADMIN chain");
  });

  t.test("a pod on node 2 resolves names through CoreDNS's Service", async (t) => {
    const dns = await getJson(["-n", "kube-system", "service", "kube-dns"]);
    const resolv = await kubectlOk(["-n", ns, "exec", "client2", "--", "cat", "/etc/resolv.conf"]);
    t.match(resolv, `nameserver ${dns.spec.clusterIP}`, "the pod's resolver is the kube-dns Service");
    const coredns = await getJson(["-n", "kube-system", "pods", "-l", "k8s-app=kube-dns"]);
    t.ok(coredns.items.some((p: any) => p.spec.nodeName === NODE_NAME), "a CoreDNS pod runs on node 1");
    const kubernetes = await getJson(["-n", "default", "service", "kubernetes"]);
    const lookup = (name: string) =>
      waitFor(`client2 to resolve ${name}`, async () => {
        const res = await kubectl(["-n", ns, "exec", "client2", "--", "nslookup", name]);
        return res.code === 0 ? res.stdout : undefined;
      }, 60_000);
    t.match(await lookup(`kubernetes.default.svc.${DNS_DOMAIN}`), kubernetes.spec.clusterIP);
    const web1 = await getJson(["-n", ns, "service", "web1"]);
    t.match(await lookup(`web1.${ns}.svc.${DNS_DOMAIN}`), web1.spec.clusterIP);
  });

  t.test("a DaemonSet runs one pod on each node, each on its node's cridock", async (t) => {
    await apply(ns, {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "everywhere" },
      spec: {
        selector: { matchLabels: { app: "everywhere" } },
        template: {
          metadata: { labels: { app: "everywhere" } },
          spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "sleep", image: BUSYBOX_IMAGE, command: sleeper }] },
        },
      },
    });
    const status = await waitFor("the DaemonSet to be ready on both nodes", async () => {
      const ds = await getJson(["-n", ns, "daemonset", "everywhere"]);
      return ds.status.desiredNumberScheduled === 2 && ds.status.numberReady === 2 ? ds.status : undefined;
    }, 180_000);
    t.equal(status.numberReady, 2);
    const dsPods = (await getJson(["-n", ns, "pods", "-l", "app=everywhere"])).items;
    t.same(dsPods.map((p: any) => p.spec.nodeName).sort(), [NODE_NAME, NODE2_NAME].sort(), "one pod per node");
    const onNode2 = dsPods.find((p: any) => p.spec.nodeName === NODE2_NAME);
    const id = onNode2.status.containerStatuses[0].containerID.replace("docker://", "");
    const listed = await node2Crictl(["inspect", id]);
    t.equal(listed.code, 0, `node 2's cridock knows the container (${listed.stderr})`);
    // Node 2's kubelet runs with its own cgroup root; with QoS cgroups its
    // pods' cgroups are below it (without them kubelet names no parent, and
    // Docker's default, one cgroup per container id, cannot collide either).
    const configz = JSON.parse(await kubectlOk(["get", "--raw", `/api/v1/nodes/${NODE2_NAME}/proxy/configz`])).kubeletconfig;
    t.equal(configz.cgroupRoot, NODE2_CGROUP_ROOT, "node 2's kubelet took its own cgroup root");
    const inspected = await run("docker", ["--host", NODE2_DOCKER_ENDPOINT, "inspect", "--format", "{{.HostConfig.CgroupParent}}", id]);
    t.equal(inspected.code, 0, inspected.stderr);
    const parent = inspected.stdout.trim();
    if (configz.cgroupsPerQOS) t.ok(parent.startsWith(`${NODE2_CGROUP_ROOT}/`), `its cgroup parent ${parent} is under node 2's cgroup root`);
    else t.equal(parent, "", "without QoS cgroups kubelet names no cgroup parent");
  });
}

const nodes = await getJson(["nodes"]);
const nodeNames: string[] = nodes.items.map((n: any) => n.metadata.name);

if (!nodeNames.includes(NODE2_NAME)) {
  if (process.env.CRIDOCK_CLUSTER_NODES === "2") {
    t.fail(`CRIDOCK_CLUSTER_NODES=2 but the cluster's nodes are ${nodeNames.join(", ")}: no ${NODE2_NAME}`);
  } else {
    t.plan(0, `the cluster has one node (${nodeNames.join(", ")}); these tests need scripts/cluster.sh up --nodes 2`);
  }
} else {
  await twoNodes();
}
