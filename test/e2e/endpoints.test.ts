// kubelet's own endpoints on a pod cridock runs: /stats/summary (pod and
// container CPU, memory, filesystem and network), /run, /containerLogs, and
// /exec, /attach and /portForward over SPDY and WebSocket; and a hostNetwork
// pod. Pod network stats come from ListPodSandboxStats (kubelet's
// PodAndContainerStatsFromCRI gate: without it kubelet asks cAdvisor, which
// knows no Docker containers since kubelet dropped its Docker support).
import t from "tap";
import { KubeletEnv, sleep } from "./harness/kubelet-env.ts";
import { portForwardGet, spdyCommand, wsCommand } from "./harness/kubelet-streams.ts";
import { BUSYBOX_IMAGE, HTTPD_IMAGE } from "../helpers/env.ts";

const env = await KubeletEnv.start();
t.teardown(() => env.destroy());

const WEB = "web";
const HOSTNET = "hostnet";
await env.writePod({
  metadata: { name: WEB, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 2,
    containers: [
      { name: "httpd", image: HTTPD_IMAGE, ports: [{ containerPort: 80 }] },
      // Work for the stats: CPU, memory, disk, and traffic to the web server next door.
      {
        name: "worker",
        image: BUSYBOX_IMAGE,
        stdin: true,
        command: ["sh", "-c", "echo worker-start; dd if=/dev/zero of=/tmp/blob bs=1M count=8 2>/dev/null; i=0; while [ $i -lt 40 ]; do wget -q -O /dev/null http://127.0.0.1/ ; i=$((i+1)); done; echo worker-ready; exec cat"],
      },
    ],
  },
});
await env.writePod({
  metadata: { name: HOSTNET, namespace: "default" },
  spec: { hostNetwork: true, terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sleep", "3600"] }] },
});
const web = await env.waitRunning(WEB);
await env.waitRunning(HOSTNET);
const podPath = `default/${env.podName(WEB)}`;

t.test("/containerLogs returns the container's output", async (t) => {
  const deadline = Date.now() + 30_000;
  let body = "";
  while (!body.includes("worker-ready") && Date.now() < deadline) {
    body = (await env.get(`/containerLogs/${podPath}/worker`)).body;
    await sleep(300);
  }
  t.match(body, /worker-start\nworker-ready\n/, "both lines, in order, once");
  t.match((await env.get(`/containerLogs/${podPath}/httpd`)).body, /^httpd: serving/);
});

t.test("/run runs a command in the container", async (t) => {
  // kubelet splits cmd on spaces, with no shell quoting.
  const res = await env.post(`/run/${podPath}/worker?cmd=${encodeURIComponent("hostname")}`);
  t.equal(res.status, 200, res.body);
  t.equal(res.body.trim(), env.podName(WEB));
});

for (const transport of ["spdy", "websocket"] as const) {
  const run = transport === "spdy" ? spdyCommand : wsCommand;
  t.test(`/exec over ${transport}`, async (t) => {
    const r = await run(env.kubeletPort, `/exec/${podPath}/worker?command=sh&command=-c&command=${encodeURIComponent("echo out; echo err >&2; exit 3")}&output=1&error=1`);
    t.equal(r.stdout, "out\n");
    t.equal(r.stderr, "err\n");
    t.match(r.status, /exit code 3|"code":3|ExitCode/, "the exit code comes back on the error channel");
  });
  t.test(`/exec with stdin over ${transport}`, async (t) => {
    const r = await run(env.kubeletPort, `/exec/${podPath}/worker?command=cat&input=1&output=1`, `hello-${transport}\n`);
    t.equal(r.stdout, `hello-${transport}\n`);
  });
  t.test(`/attach over ${transport}`, async (t) => {
    const expected = `attached-${transport}\n`;
    const r = await run(env.kubeletPort, `/attach/${podPath}/worker?input=1&output=1`, expected, (out) => out.stdout.includes(expected));
    t.match(r.stdout, expected, `cat echoes what attach sent to its stdin (${JSON.stringify(r)})`);
  });
  t.test(`/portForward over ${transport}`, async (t) => {
    const response = await portForwardGet(env.kubeletPort, `/portForward/${podPath}`, 80, transport);
    t.match(response, /^HTTP\/1\.[01] 200/);
    t.match(response, /cridock test httpd/);
  });
}

t.test("/stats/summary reports CPU, memory, filesystem and network per pod and container", async (t) => {
  type Iface = { name: string; rxBytes?: number; txBytes?: number };
  type PodStats = {
    podRef: { name: string };
    cpu?: { usageCoreNanoSeconds?: number };
    memory?: { workingSetBytes?: number };
    network?: { rxBytes?: number; txBytes?: number; interfaces?: Iface[] } | null;
    containers?: { name: string; cpu?: { usageCoreNanoSeconds?: number }; memory?: { workingSetBytes?: number }; rootfs?: { usedBytes?: number }; logs?: { usedBytes?: number } }[];
    "ephemeral-storage"?: { usedBytes?: number };
  };
  let pod: PodStats | undefined;
  const deadline = Date.now() + 40_000;
  // kubelet computes CPU rates from two samples: wait until everything is there.
  while (Date.now() < deadline) {
    const res = await env.get("/stats/summary");
    t.equal(res.status, 200);
    const summary = JSON.parse(res.body) as { pods: PodStats[] };
    pod = summary.pods.find((p) => p.podRef.name === env.podName(WEB));
    const worker = pod?.containers?.find((c) => c.name === "worker");
    if (pod?.network && worker?.rootfs?.usedBytes && pod.cpu?.usageCoreNanoSeconds) break;
    await sleep(1000);
  }
  t.ok(pod, "the pod is in the summary");
  t.ok(pod!.cpu?.usageCoreNanoSeconds, "pod CPU");
  t.ok(pod!.memory?.workingSetBytes, "pod memory");
  t.ok(pod!.network, "pod network is reported");
  t.ok((pod!.network?.rxBytes ?? 0) > 0 && (pod!.network?.txBytes ?? 0) > 0, `eth0 counted traffic (${JSON.stringify(pod!.network)})`);
  t.ok(pod!.network?.interfaces?.some((i) => i.name === "eth0"), "per-interface counters");
  const worker = pod!.containers?.find((c) => c.name === "worker");
  t.ok(worker?.cpu?.usageCoreNanoSeconds, "container CPU");
  t.ok(worker?.memory?.workingSetBytes, "container memory");
  t.ok((worker?.rootfs?.usedBytes ?? 0) >= 8 * 1024 * 1024, `the writable layer holds the 8 MiB file (${worker?.rootfs?.usedBytes})`);
  t.ok(worker?.logs?.usedBytes, "container log usage");
  t.ok(pod!["ephemeral-storage"]?.usedBytes, "pod ephemeral storage");
});

t.test("a hostNetwork pod shares the node's network namespace", async (t) => {
  const res = await env.post(`/run/default/${env.podName(HOSTNET)}/app?cmd=${encodeURIComponent("ip -o link show")}`);
  t.equal(res.status, 200, res.body);
  t.match(res.body, env.cni.bridge, "the node's pod bridge is visible inside");
  const hostnet = await env.pod(HOSTNET);
  t.not(hostnet?.status.podIP, web.status.podIP);
  t.notMatch(hostnet?.status.podIP ?? "", /^10\.97\./, "no pod-network IP");
});
