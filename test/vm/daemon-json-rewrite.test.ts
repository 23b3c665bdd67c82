/**
 * A tool that owns /etc/docker/daemon.json, as minikube does on every
 * start: it writes the file whole, without cridock's runtime, and restarts
 * dockerd. On the cgroup v2 node (Debian 13), with the .deb installed and a
 * standalone kubelet v1.36.3 running two static pods, one in its own user
 * namespace (`hostUsers: false`, which needs cridock's OCI runtime layer)
 * and one whose container reads kubelet's `unified` memory.oom.group at its
 * first instruction (in force only through the layer):
 * - after the rewrite and dockerd's restart, cridock registers the layer
 *   again by itself (src/oci/layer-reregister.ts): daemon.json has
 *   `runtimes.cridock` beside the tool's settings, with the mode the tool
 *   gave it; dockerd lists the runtime without another restart (SIGHUP:
 *   its pid is the one the restart gave it); cridock's log says it did,
 *   and why;
 * - kubelet brings both pods back (dockerd's restart stopped their
 *   containers: no live-restore), the user-namespaced one included;
 * - a container created from then on has the layer: a new container of the
 *   unified pod reads memory.oom.group=1 at its first instruction;
 * - a new user-namespaced pod starts.
 * The node is left as found: daemon.json restored, dockerd restarted,
 * kubelet and its pods gone.
 *
 * kubelet is the one scripts/env/install-kubernetes.sh builds; without it
 * the test is skipped, as pods.test.ts is.
 */
import t from "tap";
import { existsSync } from "node:fs";
import { GUEST_CRICTL, nodeHasUserns, suiteSetup, waitFor, type VmNode } from "../helpers/vm-node.ts";
import { buildKubeletImages, KUBELET, kubeletConfig, MANIFESTS, NODE_NAME, podManifest, prepareKubeletNode, startKubelet, withSpec } from "../helpers/vm-kubelet.ts";

const DAEMON_JSON = "/etc/docker/daemon.json";
/** The node's daemon.json before the test, to put back. */
const SAVED = "/root/cridock-test-daemon.json.orig";
const crictl = GUEST_CRICTL;

const FIRST_READ = "first instruction: oom.group=1";
const UNIFIED_POD = podManifest("unified", {
  name: "app",
  command: ["sh", "-c", 'echo "first instruction: oom.group=$(cat /sys/fs/cgroup/memory.oom.group)"; exec sleep 36000'],
  resources: { limits: { memory: "64Mi", cpu: "200m" }, requests: { memory: "32Mi", cpu: "100m" } },
});
const usernsPod = (name: string) =>
  withSpec(podManifest(name, { name: "app", command: ["sh", "-c", 'echo "map=$(tr -s " " </proc/self/uid_map | sed "s/^ //")"; exec sleep 36000'] }), { hostUsers: false });

const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;

/** The running container of pod NAME's `app`, with its first log line; undefined until there is one. */
async function runningApp(vm: VmNode, pod: string): Promise<{ id: string; first: string } | undefined> {
  const listed = await vm.ssh(`${crictl} ps -q --name '^app$' --label io.kubernetes.pod.name=${pod}-${NODE_NAME} --state running`, { timeoutMs: 180_000 });
  const id = listed.status === 0 ? listed.stdout.trim().split("\n")[0] : undefined;
  if (!id) return undefined;
  const first = (await vm.run(`${crictl} logs ${id} 2>/dev/null | head -n1`, { timeoutMs: 180_000 })).trim();
  return first ? { id, first } : undefined;
}

/** minikube's daemon.json from the node's own: written whole, its settings set, no `runtimes` (and so no cridock). */
function toolsDaemonJson(current: string): string {
  const config = current.trim() ? (JSON.parse(current) as Record<string, unknown>) : {};
  delete config.runtimes;
  // minikube's keys; the node's own exec-opts and storage (an image store switched would lose the images) are kept.
  return JSON.stringify({ "exec-opts": ["native.cgroupdriver=systemd"], "log-driver": "json-file", "log-opts": { "max-size": "100m" }, ...config }, null, 2) + "\n";
}

if (!existsSync(KUBELET)) {
  t.plan(0, `${KUBELET} is missing: scripts/env/install-kubernetes.sh builds it`);
} else {
  const { vm, deb, images } = await suiteSetup(t, "daemon-json", buildKubeletImages, (vm) =>
    vm.ssh(
      [
        "systemctl stop kubelet",
        `rm -f ${MANIFESTS}/*`,
        "docker ps -aq --filter label=io.kubernetes.docker.type | xargs -r docker rm -f",
        `if [ -f ${SAVED} ]; then cp ${SAVED} ${DAEMON_JSON} && rm -f ${SAVED} && systemctl restart docker; fi`,
        // The next file expects the layer as the .deb left it.
        "cridock oci-layer status >/dev/null || cridock oci-layer install",
      ].join("; "),
      { timeoutMs: 600_000 },
    ),
  );

  t.test("the node: cridock from its .deb, kubelet, the pods running under the layer", async (t) => {
    await prepareKubeletNode(vm, deb, images);
    t.match((await vm.run("cridock oci-layer status")).trim(), /^ready: runtime "cridock"/, "the .deb registered the layer");
    t.ok(await vm.run("test -f /var/lib/cridock/oci-layer.json && echo yes"), "and recorded it for cridock");
    await vm.run(`cp -p ${DAEMON_JSON} ${SAVED}`);
    const userns = await nodeHasUserns(vm);
    t.ok(userns, "the node gives pods user namespaces (Debian 13)");
    await vm.run(`mkdir -p ${MANIFESTS} && cat >${MANIFESTS}/unified.json`, { input: JSON.stringify(UNIFIED_POD, null, 2) });
    await vm.run(`cat >${MANIFESTS}/userns.json`, { input: JSON.stringify(usernsPod("userns"), null, 2) });
    const since = Date.now();
    await startKubelet(vm, kubeletConfig());
    const unified = await waitFor(() => runningApp(vm, "unified"), 600_000);
    const ns = await waitFor(() => runningApp(vm, "userns"), 600_000);
    t.comment(`both pods running ${seconds(since)} after kubelet started`);
    t.equal(unified?.first, FIRST_READ, "the unified pod's first instruction read memory.oom.group=1 (the layer)");
    t.match(ns?.first ?? "", /^map=0 \d+ 65536$/, "the user-namespaced pod runs with kubelet's mapping");
  });

  t.test("minikube's sequence: daemon.json written whole without the runtime, dockerd restarted", async (t) => {
    const before = await vm.run(`cat ${DAEMON_JSON}`);
    const written = toolsDaemonJson(before);
    // As a tool copies a file in: a new file renamed over the old one, 0644.
    await vm.run(`cat >${DAEMON_JSON}.tool && chmod 0644 ${DAEMON_JSON}.tool && mv ${DAEMON_JSON}.tool ${DAEMON_JSON}`, { input: written });
    t.notMatch(await vm.run(`cat ${DAEMON_JSON}`), /cridock/, "the tool's daemon.json has no cridock runtime");
    const restartedAt = Date.now();
    const journalSince = (await vm.run("date '+%Y-%m-%d %H:%M:%S'")).trim();
    await vm.run("systemctl restart docker", { timeoutMs: 600_000 });
    const pidAfterRestart = (await vm.run("cat /var/run/docker.pid")).trim();

    // cridock notices dockerd's return (its event stream reconnects), finds the layer gone and registers it again.
    const back = await waitFor(async () => ((await vm.ssh("cridock oci-layer status")).stdout.startsWith("ready:") ? true : undefined), 300_000, 2000);
    t.ok(back, `the layer is registered again (${seconds(restartedAt)} after the restart began)`);
    const config = JSON.parse(await vm.run(`cat ${DAEMON_JSON}`)) as Record<string, unknown>;
    t.same(config.runtimes, { cridock: { path: "/var/lib/cridock/oci-runtime" } }, "daemon.json has the runtime again");
    t.same(config["log-opts"], JSON.parse(written)["log-opts"], "beside the tool's settings, kept");
    t.equal((await vm.run(`stat -c %a:%U ${DAEMON_JSON}`)).trim(), "644:root", "with the mode and owner the tool gave it");
    t.equal((await vm.run("cat /var/run/docker.pid")).trim(), pidAfterRestart, "dockerd reloaded it (SIGHUP), not restarted again");
    t.match(await vm.run("docker info --format '{{json .Runtimes}}'"), /"cridock":\{"path":"\/var\/lib\/cridock\/oci-runtime"/, "dockerd lists the runtime");
    const log = await vm.run(`journalctl -u cridock --since '${journalSince}' --no-pager -o cat | grep 'registered the OCI runtime layer with dockerd again' || true`);
    t.match(log, /"reason":"dockerd has no runtime named/, "cridock's log says it registered the layer again, and why");
  });

  t.test("kubelet brings the pods back; containers created from then on have the layer; a new user-namespaced pod starts", async (t) => {
    const since = Date.now();
    const unified = await waitFor(() => runningApp(vm, "unified"), 900_000);
    const ns = await waitFor(() => runningApp(vm, "userns"), 900_000);
    t.ok(unified, `the unified pod runs again (${seconds(since)})`);
    t.ok(ns, "the user-namespaced pod runs again");
    t.match(ns?.first ?? "", /^map=0 \d+ 65536$/, "in its own user namespace");
    t.comment(`the unified pod's container after dockerd's restart first read: ${unified?.first}`);
    // kubelet may have made its container in the seconds before the layer was back; one made now must have it.
    if (unified) {
      await vm.run(`${crictl} stop ${unified.id}`, { timeoutMs: 180_000 });
      const again = await waitFor(async () => {
        const c = await runningApp(vm, "unified");
        return c && c.id !== unified.id ? c : undefined;
      }, 600_000);
      t.equal(again?.first, FIRST_READ, "a new container of the unified pod read memory.oom.group=1 at its first instruction");
      t.equal(again && (await vm.run(`docker inspect -f '{{.HostConfig.Runtime}}' ${again.id}`)).trim(), "cridock", "under the layer");
    }
    await vm.run(`cat >${MANIFESTS}/userns-new.json`, { input: JSON.stringify(usernsPod("userns-new"), null, 2) });
    const fresh = await waitFor(() => runningApp(vm, "userns-new"), 600_000);
    t.match(fresh?.first ?? "", /^map=0 \d+ 65536$/, "a new pod with hostUsers: false starts, in its own user namespace");
    const refused = await vm.run("journalctl -u kubelet --no-pager -o cat | grep -c 'unknown runtime' || true");
    t.comment(`kubelet's log lines with "unknown runtime" over the test: ${refused.trim()}`);
  });
}
