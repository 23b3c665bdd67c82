/**
 * kubelet's resources in force on a cgroup v2 node (DESIGN.md "Nodes"):
 * on the cgroup v2 node of scripts/vm-node.sh, with the .deb installed as
 * an operator does, a standalone kubelet v1.36.3 with the systemd cgroup
 * driver runs one static pod whose container has limits (memory 64Mi, cpu
 * 200m) and smaller requests (so the pod is Burstable). kubelet sends
 * `unified` memory.oom.group and memory.swap.max for every container on
 * cgroup v2; the container must run, and its own cgroup (a docker-<id>.scope
 * under kubepods.slice/kubepods-burstable.slice) must hold memory.max
 * 67108864, memory.swap.max 0, memory.oom.group 1 and cpu.max "20000 100000".
 *
 * kubelet is the one scripts/install-kubernetes.sh builds; without it the
 * test is skipped. The guest reaches no registry: the pause image
 * (cridock's default, registry.k8s.io/pause:3.10.2) and a busybox image are
 * built on the host as the test environment builds its images
 * (scripts/images/) and go in with `docker load`.
 *
 * kubelet's configuration is written here rather than taken from the e2e
 * harness (test/e2e/harness/kubelet-env.ts): that one is made for the shared
 * cgroup v1 host (no QoS cgroups, no node allocatable, eviction and image
 * GC turned off), and this test wants kubelet's defaults with the systemd
 * driver. Only what a standalone kubelet needs is set besides.
 */
import t from "tap";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_PAUSE_IMAGE, REGISTRY } from "../helpers/env.ts";
import { VmNode, buildDeb, installDeb, loadImage, writeImageArchive, writePauseArchive, type RunResult } from "../helpers/vm-node.ts";
import { busyboxEntries, userlandEntries } from "../../scripts/images/rootfs.ts";

const KUBELET = join(process.env.CRIDOCK_TOOLS_DIR ?? "/var/cache/cridock-tools", "kubernetes", "v1.36.3", "bin", "kubelet");
/** A small busybox (sh and sleep) for the pod's container. */
const BUSYBOX = `${REGISTRY}/cridock-test/busybox-vm:1`;
const NODE_NAME = "cridock-vm";
const MANIFESTS = "/etc/kubernetes/manifests";
const KUBELET_CONFIG = "/etc/kubernetes/kubelet-config.json";
const POD = "limits";

const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;

/** The two docker-load tarballs, in DIR. */
async function buildImages(dir: string): Promise<string[]> {
  const archives = [join(dir, "pause.tar"), join(dir, "busybox.tar")];
  await writePauseArchive(archives[0]!);
  await writeImageArchive(archives[1]!, [...busyboxEntries(["sh", "sleep"]), ...userlandEntries()], { Cmd: ["sh"], Env: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] }, [BUSYBOX]);
  return archives;
}

function kubeletConfig(): Record<string, unknown> {
  return {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    cgroupDriver: "systemd",
    containerRuntimeEndpoint: "unix:///var/run/cridock.sock",
    staticPodPath: MANIFESTS,
    // Standalone: no API server to authenticate against; the API on the guest's loopback only.
    address: "127.0.0.1",
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: "AlwaysAllow" },
  };
}

function podManifest(): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: POD, namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: "app",
          image: BUSYBOX,
          imagePullPolicy: "Never",
          command: ["sleep", "36000"],
          resources: { limits: { memory: "64Mi", cpu: "200m" }, requests: { memory: "32Mi", cpu: "100m" } },
        },
      ],
    },
  };
}

function output(r: RunResult): string {
  return (r.stdout + r.stderr).trim();
}

if (!existsSync(KUBELET)) {
  t.plan(0, `${KUBELET} is missing: scripts/install-kubernetes.sh builds it`);
} else {
  const started = Date.now();
  const scratch = await mkdtemp(join(tmpdir(), "cridock-vm-kubelet-"));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const [booted, built, images] = await Promise.allSettled([VmNode.start("kubelet"), buildDeb(), buildImages(scratch)]);
  if (booted.status === "rejected") throw booted.reason;
  const vm = booted.value;
  t.teardown(() => vm.stop());
  if (built.status === "rejected") throw built.reason;
  if (images.status === "rejected") throw images.reason;
  t.comment(`VM booted, .deb and images built in ${seconds(started)}`);

  t.test("the node: cridock from its .deb, kubelet, the images loaded", async (t) => {
    let since = Date.now();
    await installDeb(vm, built.value);
    t.comment(`.deb installed in ${seconds(since)}`);
    since = Date.now();
    for (const archive of images.value) await loadImage(vm, archive);
    t.comment(`images loaded in ${seconds(since)}`);
    since = Date.now();
    await vm.copy(KUBELET, "/usr/local/bin/kubelet", 900_000);
    t.comment(`kubelet copied in ${seconds(since)}`);
    t.match(await vm.run("/usr/local/bin/kubelet --version", { timeoutMs: 300_000 }), /^Kubernetes v1\.36\.3$/m, "kubelet v1.36.3 runs in the guest");
    t.match(await vm.run("docker image ls --format '{{.Repository}}:{{.Tag}}'"), new RegExp(`^${DEFAULT_PAUSE_IMAGE.replace(/\./g, "\\.")}$`, "m"), "the pause image is loaded");
  });

  t.test("a Burstable container's limits and kubelet's unified settings are in its cgroup", async (t) => {
    await vm.run(`mkdir -p ${MANIFESTS} && cat >${KUBELET_CONFIG}`, { input: JSON.stringify(kubeletConfig(), null, 2) });
    await vm.run(`cat >${MANIFESTS}/${POD}.json`, { input: JSON.stringify(podManifest(), null, 2) });
    const since = Date.now();
    await vm.run(
      `systemd-run --unit=kubelet --description="kubelet (cridock VM test)" /usr/local/bin/kubelet --config=${KUBELET_CONFIG} --hostname-override=${NODE_NAME} --v=2`,
    );
    // The container, once kubelet has made the pod (about a minute under
    // TCG); kubelet retries a refused CreateContainer for ever, so the
    // first refusal in its log ends the wait.
    const filter = `--filter label=io.kubernetes.pod.name=${POD}-${NODE_NAME} --filter label=io.kubernetes.container.name=app`;
    let id = "";
    let refused = "";
    const deadline = Date.now() + 600_000;
    while (Date.now() < deadline) {
      id = (await vm.run(`docker ps -q --no-trunc ${filter}`)).trim();
      if (id) break;
      refused = (await vm.run(`journalctl -u kubelet --no-pager -o cat | grep -m3 'CreateContainer' | grep 'code = ' || true`)).trim();
      if (refused) break;
      const kubelet = await vm.ssh("systemctl is-active kubelet");
      if (kubelet.stdout.trim() !== "active") break;
      await new Promise((r) => setTimeout(r, 5000));
    }
    if (!id) {
      const logs = output(await vm.ssh("journalctl -u kubelet --no-pager -o cat | grep -iE 'error|fail' | tail -n 15; journalctl -u cridock --no-pager -o cat | tail -n 10"));
      t.fail(`the pod's container did not run${refused ? `: kubelet's CreateContainer was refused:\n${refused}` : ""}\n${logs}`);
      return;
    }
    t.comment(`container running ${seconds(since)} after kubelet started`);
    const pid = (await vm.run(`docker inspect -f '{{.State.Pid}}' ${id}`)).trim();
    const cgroup = (await vm.run(`cat /proc/${pid}/cgroup`)).trim();
    t.match(cgroup, new RegExp(`^0::/kubepods\\.slice/kubepods-burstable\\.slice/kubepods-burstable-pod[0-9a-f_]+\\.slice/docker-${id}\\.scope$`), "the container's own cgroup, under the Burstable QoS slice");
    const dir = `/sys/fs/cgroup${cgroup.slice(3)}`;
    const read = async (file: string) => (await vm.run(`cat ${dir}/${file}`)).trim();
    const values = {
      "memory.max": await read("memory.max"),
      "memory.swap.max": await read("memory.swap.max"),
      "memory.oom.group": await read("memory.oom.group"),
      "cpu.max": await read("cpu.max"),
    };
    t.comment(`${dir}: ${JSON.stringify(values)}`);
    t.same(values, { "memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1", "cpu.max": "20000 100000" });
  });
}
