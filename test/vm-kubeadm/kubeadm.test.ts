/**
 * A kubeadm cluster on the cgroup v2 node (docs/testing.md, "The cgroup v2
 * node"), made as an operator makes one on a Debian server: cridock
 * from its .deb, kubelet under systemd with kubeadm's drop-in, and
 * `kubeadm init` with kubeadm's defaults (the systemd cgroup driver among
 * them) and no preflight check ignored. Then:
 * - the node Ready (cridock's default CNI network, from the .deb);
 * - CoreDNS answering, asked from a pod through the DNS Service (so
 *   kube-proxy's rules too);
 * - a Deployment whose pod's logs and exec go through kubectl;
 * - in-place resize through the API server, of a container (cpu.max,
 *   cpu.weight, memory.max) and of its pod (pod-level resources: the pod's
 *   cgroup, and UpdatePodSandboxResources recorded by cridock);
 * - swap turned on as an operator does, with LimitedSwap: kubelet's share
 *   in a Burstable container's memory.swap.max (static pods, as in
 *   test/vm/pods.test.ts, are critical and get no swap).
 *
 * What is not a default, and why:
 * - criSocket: cridock's socket, which kubeadm does not look for;
 * - kubeadm's waits for kubelet and the control plane (4 minutes each by
 *   default) and for API calls (1 minute) are raised: the guest's CPU is
 *   emulated, about 20 times slower, and the API server's first minutes
 *   there answer slowly (with the 1-minute default, kubeadm gave up on
 *   the admin user's ClusterRoleBinding: "context deadline exceeded");
 * - the control plane's probes get more room, through kubeadm's patches
 *   (PROBE_PATCHED below);
 * - no leader election for the controller manager and the scheduler (one
 *   control plane node has nothing to elect): under TCG their lease
 *   renewals timed out, and each lost lease made them exit and start
 *   over with full lists, 4 and 5 restarts in 15 minutes, which loaded the
 *   API server further;
 * - the operator's steps before kubeadm that Kubernetes' documentation asks
 *   for: br_netfilter loaded and IPv4 forwarding on.
 *
 * kubeadm pulls its images by their real names from the host's mirror
 * registry (scripts/env/cluster-images.sh pushes them there); the guest reaches
 * it through trustHostMirror. kubeadm, kubelet and kubectl are the ones
 * scripts/env/install-kubernetes.sh builds, copied to /usr/bin as their
 * packages put them.
 *
 * The node is a VM of its own (3 GiB: a control plane besides the pods),
 * never the suite's shared one.
 */
import t from "tap";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CRICTL, KUBERNETES_BIN_DIR, KUBERNETES_VERSION } from "../helpers/env.ts";
import { ensureDebInstalled, suiteDeb, trustHostMirror, VmNode, waitFor } from "../helpers/vm-node.ts";
import { CRITEST_BUSYBOX } from "../../scripts/env/images/critest-images.ts";
import { sharesToWeight, sharesToWeightLog } from "../../src/stats/cgroup-limits.ts";

const BINARIES = ["kubeadm", "kubelet", "kubectl"].map((name) => join(KUBERNETES_BIN_DIR, name));
const NODE_NAME = "cridock-vm";
const KUBECTL = "kubectl --kubeconfig=/etc/kubernetes/admin.conf";
const APP = "hello";

/** kubelet's unit and kubeadm's drop-in, as the kubelet and kubeadm packages install them. */
const KUBELET_UNIT = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`;
const KUBEADM_DROP_IN = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`;

const KUBEADM_CONFIG = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: ${NODE_NAME}
  criSocket: unix:///var/run/cridock.sock
patches:
  directory: /root/kubeadm-patches
timeouts:
  kubeletHealthCheck: 15m0s
  controlPlaneComponentHealthCheck: 20m0s
  kubernetesAPICall: 15m0s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ${KUBERNETES_VERSION}
controllerManager:
  extraArgs:
  - name: leader-elect
    value: "false"
scheduler:
  extraArgs:
  - name: leader-elect
    value: "false"
`;

/**
 * kubeadm's probes for its static pods (the API server's startup probe:
 * 24 tries, 10 s apart, 15 s each) are made for a real CPU. Under TCG the
 * API server's first start, with its bootstrap roles, takes longer, and a
 * try beside other VMs saw kubelet restart it there. kubeadm's own
 * `patches` (strategic merge, one file per component) give every probe
 * ten times the room; nothing else of the manifests changes.
 */
const PROBE_PATCHED = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];
const probePatch = (name: string) =>
  JSON.stringify({
    spec: {
      containers: [
        {
          name,
          startupProbe: { failureThreshold: 240, timeoutSeconds: 60 },
          livenessProbe: { failureThreshold: 80, timeoutSeconds: 60 },
        },
      ],
    },
  });

/** A one-replica Deployment of NAME whose one container (also NAME) runs critest's busybox, which the mirror serves. */
function deployment(name: string, container: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default" },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { terminationGracePeriodSeconds: 5, containers: [{ name, image: CRITEST_BUSYBOX, ...container }] },
      },
    },
  };
}

/** Writes a line, then waits. */
const DEPLOYMENT = deployment(APP, { command: ["sh", "-c", "echo hello from cridock; exec sleep 36000"] });

/** Pod-level resources around one container's, each resizable in place without a restart. */
const RESIZE = "resize";
const RESIZE_POD = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: RESIZE, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 5,
    resources: { requests: { cpu: "200m", memory: "64Mi" }, limits: { cpu: "400m", memory: "128Mi" } },
    containers: [
      {
        name: "app",
        image: CRITEST_BUSYBOX,
        command: ["sleep", "36000"],
        resizePolicy: [
          { resourceName: "cpu", restartPolicy: "NotRequired" },
          { resourceName: "memory", restartPolicy: "NotRequired" },
        ],
        resources: { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m", memory: "64Mi" } },
      },
    ],
  },
};
const CONTAINER_RESIZE = {
  spec: { containers: [{ name: "app", resources: { requests: { cpu: "150m", memory: "32Mi" }, limits: { cpu: "300m", memory: "96Mi" } } }] },
};
const POD_RESIZE = { spec: { resources: { requests: { cpu: "200m", memory: "64Mi" }, limits: { cpu: "500m", memory: "160Mi" } } } };

/** Burstable, with a memory request below its limit: LimitedSwap gives it swap. */
const SWAP_APP = "swapper";
const SWAP_DEPLOYMENT = deployment(SWAP_APP, { command: ["sleep", "36000"], resources: { requests: { memory: "32Mi" }, limits: { memory: "64Mi" } } });

const seconds = (since: number) => Math.round((Date.now() - since) / 1000);
/** How long one kubectl watch in `until` may block before it is started again. */
const KUBECTL_WAIT_S = 300;

/**
 * What the guest was busy with, for a failed wait: its load, the processes
 * with the most CPU time, and the containers with their restarts (the
 * attempt number in each name). The control plane under TCG is short of
 * CPU, and this says who took it.
 */
const NODE_LOAD =
  "uptime; ps -eo times,etimes,comm --sort=-times | head -n 12; docker ps -a --format '{{.Names}} {{.Status}}' | grep -v '^k8s_POD' | cut -c1-110";

const missing = [...BINARIES, CRICTL].find((path) => !existsSync(path));
if (missing) {
  t.plan(0, `${missing} is missing: scripts/env/install-kubernetes.sh and install-cri-tools.sh build it`);
} else {
  const started = Date.now();
  const [booted, built] = await Promise.allSettled([VmNode.start("kubeadm", { memoryMb: 3072 }), suiteDeb()]);
  if (booted.status === "rejected") throw booted.reason;
  const vm = booted.value;
  t.teardown(() => vm.stop());
  if (built.status === "rejected") throw built.reason;
  t.comment(`VM booted and .deb built in ${seconds(started)} s`);
  /** Seconds each step took, printed as a comment by the last test. */
  const times: Record<string, number> = {};
  const nodeLoad = async () => {
    const r = await vm.ssh(NODE_LOAD, { timeoutMs: 300_000 });
    return `the node then:\n${(r.stdout + r.stderr).trim()}`;
  };

  /**
   * Runs CMD until it succeeds (5 s between tries), or fails the wait; its
   * last output either way. A try may block for up to KUBECTL_WAIT_S: the
   * waits below are kubectl's own watches (`kubectl wait`, `rollout
   * status`) rather than a kubectl started every few seconds, since each
   * start of that binary costs the emulated CPU seconds the control plane
   * is short of.
   */
  const until = async (what: string, command: string, timeoutMs: number): Promise<{ ok: boolean; output: string }> => {
    let output = "";
    const done = await waitFor(async () => {
      const r = await vm.ssh(command, { timeoutMs: KUBECTL_WAIT_S * 1000 + 120_000 });
      output = (r.stdout + r.stderr).trim();
      return r.status === 0 ? true : undefined;
    }, timeoutMs);
    return done ? { ok: true, output } : { ok: false, output: `${what}: not within ${timeoutMs / 1000} s; last:\n${output}\n${await nodeLoad()}` };
  };

  t.test("kubeadm init with its defaults on cridock", async (t) => {
    let since = Date.now();
    await ensureDebInstalled(vm, built.value);
    await trustHostMirror(vm);
    for (const path of BINARIES) await vm.copy(path, `/usr/bin/${path.slice(path.lastIndexOf("/") + 1)}`);
    await vm.run("mkdir -p /etc/systemd/system/kubelet.service.d && cat >/etc/systemd/system/kubelet.service", { input: KUBELET_UNIT });
    await vm.run("cat >/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", { input: KUBEADM_DROP_IN });
    await vm.run("systemctl daemon-reload && systemctl enable kubelet");
    await vm.run("modprobe br_netfilter && sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1");
    await vm.run("cat >/root/kubeadm.yaml", { input: KUBEADM_CONFIG });
    for (const name of PROBE_PATCHED) await vm.run(`mkdir -p /root/kubeadm-patches && cat >/root/kubeadm-patches/${name}+strategic.json`, { input: probePatch(name) });
    // The runtime up before kubeadm, as an operator checks it: kubeadm's
    // preflight gives the CRI socket a few seconds, and cridock's first
    // start from its socket takes longer under TCG (a try beside other
    // VMs failed "validate CRI v1 runtime API … context deadline exceeded").
    const up = await until("cridock active", "systemctl start cridock.service && systemctl is-active --quiet cridock.service", 5 * 60_000);
    t.ok(up.ok, up.ok ? "cridock.service active" : up.output);
    times.prepare = seconds(since);
    since = Date.now();
    const init = await vm.ssh("kubeadm init --config /root/kubeadm.yaml 2>&1", { timeoutMs: 40 * 60_000 });
    times.kubeadmInit = seconds(since);
    const out = init.stdout + init.stderr;
    t.equal(init.status, 0, `kubeadm init succeeds${init.status === 0 ? "" : `:\n${out.slice(-3000)}`}`);
    if (init.status !== 0) {
      // What the control plane was doing, and the API server's last words.
      const apiServer = await vm.ssh("docker ps -aq --filter label=io.kubernetes.container.name=kube-apiserver | head -n 1 | xargs -r docker logs --tail 25 2>&1");
      t.comment(`${await nodeLoad()}\nthe API server's log:\n${(apiServer.stdout + apiServer.stderr).trim()}`);
    }
    t.match(out, /Your Kubernetes control-plane has initialized successfully/, "kubeadm says the control plane is up");
    t.comment(`kubeadm's warnings: ${out.match(/\[WARNING[^\n]*/g)?.join("; ") ?? "none"}`);
    t.match(await vm.run("cat /var/lib/kubelet/config.yaml"), /^cgroupDriver: systemd$/m, "kubelet's configuration from kubeadm: the systemd driver");
  });

  t.test("the node Ready, CoreDNS answering through the DNS Service", async (t) => {
    let since = Date.now();
    // One node: the control plane's taint would keep the Deployment off it.
    await vm.run(`${KUBECTL} taint nodes --all node-role.kubernetes.io/control-plane- || true`);
    const ready = await until("node Ready", `${KUBECTL} wait --for=condition=Ready node/${NODE_NAME} --timeout=${KUBECTL_WAIT_S}s`, 20 * 60_000);
    times.nodeReady = seconds(since);
    t.ok(ready.ok, ready.ok ? "node Ready" : ready.output);
    since = Date.now();
    const dns = await until("CoreDNS available", `${KUBECTL} -n kube-system rollout status deployment/coredns --timeout=${KUBECTL_WAIT_S}s`, 20 * 60_000);
    times.coreDnsAvailable = seconds(since);
    t.ok(dns.ok, dns.ok ? "CoreDNS available" : dns.output);
  });

  t.test("a Deployment: Running, its logs and exec through kubectl, DNS from its pod", async (t) => {
    let since = Date.now();
    await vm.run(`${KUBECTL} apply -f -`, { input: JSON.stringify(DEPLOYMENT) });
    const rolled = await until("Deployment available", `${KUBECTL} rollout status deployment/${APP} --timeout=${KUBECTL_WAIT_S}s`, 20 * 60_000);
    times.deploymentAvailable = seconds(since);
    if (!rolled.ok) {
      const state = (await vm.ssh(`${KUBECTL} get pods -A -o wide; ${KUBECTL} describe pod -l app=${APP} | tail -n 30`)).stdout;
      return t.fail(`${rolled.output}\n${state}`);
    }
    since = Date.now();
    t.match(await vm.run(`${KUBECTL} logs deployment/${APP}`, { timeoutMs: 300_000 }), /^hello from cridock$/m, "kubectl logs");
    t.equal((await vm.run(`${KUBECTL} exec deployment/${APP} -- sh -c 'echo $((6 * 7))'`, { timeoutMs: 300_000 })).trim(), "42", "kubectl exec");
    // The pod's resolv.conf names the DNS Service (10.96.0.10): kube-proxy's DNAT to a CoreDNS pod, CoreDNS's answer from the API.
    const lookup = await vm.ssh(`${KUBECTL} exec deployment/${APP} -- nslookup kubernetes.default.svc.cluster.local`, { timeoutMs: 300_000 });
    t.match(lookup.stdout, /Address:?\s+10\.96\.0\.1\b/, `CoreDNS answers the API server's Service address:\n${(lookup.stdout + lookup.stderr).trim()}`);
    times.logsExecDns = seconds(since);
  });

  // In-place resize through the API server's resize subresource: first the
  // container (kubelet's UpdateContainerResources), then the pod's own
  // resources (pod-level resources and their in-place resize, beta and on
  // in 1.36): kubelet resizes the pod's cgroup itself and tells cridock
  // with UpdatePodSandboxResources, which cridock records on the sandbox.
  t.test("in-place resize of a container and of its pod", async (t) => {
    const since = Date.now();
    await vm.copy(CRICTL, "/usr/local/bin/crictl");
    await vm.run(`${KUBECTL} apply -f -`, { input: JSON.stringify(RESIZE_POD) });
    const ready = await until("resize pod Ready", `${KUBECTL} wait --for=condition=Ready pod/${RESIZE} --timeout=${KUBECTL_WAIT_S}s`, 15 * 60_000);
    if (!ready.ok) return t.fail(ready.output);
    const id = (await vm.run(`docker ps -q --no-trunc --filter label=io.kubernetes.pod.name=${RESIZE} --filter label=io.kubernetes.docker.type=container`)).trim();
    const cgroup = `/sys/fs/cgroup${(await vm.run(`cat /proc/$(docker inspect -f '{{.State.Pid}}' ${id})/cgroup`)).trim().slice(3)}`;
    const podCgroup = cgroup.slice(0, cgroup.lastIndexOf("/"));
    const read = async (dir: string, ...files: string[]) => (await vm.run(`cd ${dir} && cat ${files.join(" ")}`)).trim().split("\n");
    t.same(await read(cgroup, "cpu.max", "memory.max"), ["20000 100000", "67108864"], "the container's limits at start");
    t.same(await read(podCgroup, "cpu.max", "memory.max"), ["40000 100000", "134217728"], "the pod's limits at start");

    // A strategic patch merges the containers list by name; a JSON merge
    // patch would replace the list with one holding only the resources, and
    // the API server refuses that ("only cpu and memory resources are mutable").
    await vm.run(`${KUBECTL} patch pod ${RESIZE} --subresource resize --type strategic -p '${JSON.stringify(CONTAINER_RESIZE)}'`);
    const resized = await until("the container's new limits in its cgroup", `cd ${cgroup} && [ "$(cat cpu.max memory.max | paste -sd,)" = "30000 100000,100663296" ]`, 10 * 60_000);
    t.ok(resized.ok, resized.ok ? "the container's cpu.max and memory.max resized" : resized.output);
    // 150m of CPU is 153 shares; runc turns shares into cpu.weight, with the linear formula (runc 1.1, the node's) or the log-scale one (1.3.2 on).
    const weight = BigInt((await read(cgroup, "cpu.weight"))[0]!);
    t.ok([sharesToWeight(153n), sharesToWeightLog(153n)].includes(weight), `cpu.weight ${weight} is 153 shares' weight`);
    const status = await until(
      "kubelet's status of the resized container",
      `${KUBECTL} get pod ${RESIZE} -o jsonpath='{.status.containerStatuses[0].resources.limits.memory} {.status.containerStatuses[0].restartCount}' | grep -qx '96Mi 0'`,
      5 * 60_000,
    );
    t.ok(status.ok, status.ok ? "kubelet reports the new limits (read back through ContainerStatus), no restart" : status.output);

    await vm.run(`${KUBECTL} patch pod ${RESIZE} --subresource resize --type strategic -p '${JSON.stringify(POD_RESIZE)}'`);
    const podResized = await until("the pod's new limits in its cgroup", `cd ${podCgroup} && [ "$(cat cpu.max memory.max | paste -sd,)" = "50000 100000,167772160" ]`, 10 * 60_000);
    t.ok(podResized.ok, podResized.ok ? "the pod's cpu.max and memory.max resized" : podResized.output);
    const sandbox = (await vm.run(`docker ps -q --no-trunc --filter label=io.kubernetes.pod.name=${RESIZE} --filter label=io.kubernetes.docker.type=podsandbox`)).trim();
    const recorded = await until(
      "UpdatePodSandboxResources recorded by cridock",
      `crictl --runtime-endpoint unix:///var/run/cridock.sock inspectp -o json ${sandbox} | grep -q '"memoryLimitInBytes": "167772160"'`,
      5 * 60_000,
    );
    t.ok(recorded.ok, recorded.ok ? "cridock holds the pod's new resources from UpdatePodSandboxResources (PodSandboxStatus, verbose)" : recorded.output);
    t.equal((await vm.run(`docker inspect -f '{{.State.Pid}}' ${id}`)).trim() !== "0", true, "the same container runs on");
    times.resize = seconds(since);
  });

  // Swap as an operator turns it on (Kubernetes' "Swap memory management"):
  // a swap file, then kubelet's configuration (failSwapOn false,
  // LimitedSwap) and a restart. A pod from the API server is no critical
  // pod, so a Burstable container gets kubelet's share of the swap:
  // request / node memory × swap (calcSwapForBurstablePods, from cAdvisor's
  // MemTotal and SwapTotal), which the kernel rounds down to a page.
  t.test("LimitedSwap: kubelet's share of the swap in a Burstable container's memory.swap.max", async (t) => {
    const since = Date.now();
    await vm.run("fallocate -l 512M /swapfile && chmod 0600 /swapfile && mkswap /swapfile >/dev/null && swapon /swapfile");
    await vm.run(
      "sed -i '/^failSwapOn:/d; /^memorySwap:/d' /var/lib/kubelet/config.yaml && printf 'failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n' >>/var/lib/kubelet/config.yaml && systemctl restart kubelet",
    );
    const ready = await until("node Ready after kubelet's restart", `${KUBECTL} wait --for=condition=Ready node/${NODE_NAME} --timeout=${KUBECTL_WAIT_S}s`, 10 * 60_000);
    if (!ready.ok) return t.fail(ready.output);
    await vm.run(`${KUBECTL} apply -f -`, { input: JSON.stringify(SWAP_DEPLOYMENT) });
    const rolled = await until("swap Deployment available", `${KUBECTL} rollout status deployment/${SWAP_APP} --timeout=${KUBECTL_WAIT_S}s`, 15 * 60_000);
    if (!rolled.ok) return t.fail(rolled.output);
    const id = (await vm.run(`docker ps -q --no-trunc --filter label=io.kubernetes.container.name=${SWAP_APP} --filter label=io.kubernetes.docker.type=container`)).trim();
    const cgroup = (await vm.run(`cat /proc/$(docker inspect -f '{{.State.Pid}}' ${id})/cgroup`)).trim().slice(3);
    const swapMax = (await vm.run(`cat /sys/fs/cgroup${cgroup}/memory.swap.max`)).trim();
    const meminfo = await vm.run("cat /proc/meminfo");
    const bytes = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(meminfo)![1]) * 1024;
    const share = Math.trunc(((32 * 1024 * 1024) / bytes("MemTotal")) * bytes("SwapTotal"));
    t.equal(swapMax, String(Math.floor(share / 4096) * 4096), `request 32Mi of ${bytes("MemTotal")} bytes, swap ${bytes("SwapTotal")}: kubelet asks ${share}`);
    times.limitedSwap = seconds(since);
    t.comment(`times (s): ${JSON.stringify(times)}`);
  });
}
