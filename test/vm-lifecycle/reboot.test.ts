/**
 * Reboots of the cgroup v2 node with kubelet's pods on it: a clean one
 * (`systemctl reboot`) and an unclean one (sysrq's immediate reset: no
 * sync, no unmount, no unit stopped, as at a power loss), beside a plain
 * `systemctl restart cridock`.
 *
 * kubelet (the pinned release) runs as an enabled unit of its own (not the transient
 * one of pods.test.ts), with two static pods: one that sleeps and one that
 * logs a line a second. After each boot:
 * - cridock came up on its own (socket and service enabled by the .deb),
 *   and kubelet ran both pods again, in new sandboxes;
 * - nothing of the old boot's sandboxes is left: no IP reserved in the CNI
 *   IPAM store (host-local, on disk) but the new sandboxes', no veth or
 *   netns mount but theirs, no sandbox checkpoint that is not either a
 *   ready sandbox or one stopped with its network released, no log
 *   follower holding an exited container's log, no old container running;
 * - cridock did not restart (NRestarts 0).
 * Before the unclean reboot, half-written files of cridock's own are put
 * on the disk and synced (a torn sandbox checkpoint, a checkpoint's
 * temporary file, a torn log position): after it cridock runs, warned of
 * each and set the torn ones aside in corrupt/, and removed the temporary
 * file.
 *
 * Measured and printed: from `systemctl restart cridock` to both pods
 * Ready as cridock reports them, and from the kernel's boot (/proc/uptime)
 * to both pods Ready in new sandboxes, after each kind of reboot.
 */
import t, { type Test } from "tap";
import { existsSync } from "node:fs";
import { suiteSetup, waitFor, type VmNode } from "../helpers/vm-node.ts";
import { buildKubeletImages, enableKubelet, KUBELET, kubeletConfig, MANIFESTS, NODE_NAME, podManifest, prepareKubeletNode, removeKubeletUnit } from "../helpers/vm-kubelet.ts";

const crictl = "crictl --runtime-endpoint unix:///var/run/cridock.sock --timeout 120s";
const ROOT = "/var/lib/cridock";
const IPAM_STORE = "/var/lib/cni/networks";
const PODS = {
  sleeper: podManifest("sleeper", { name: "app", command: ["sleep", "36000"] }),
  // A line a second, waiting with `read -t` on a FIFO nobody writes (no fork a line).
  ticker: podManifest("ticker", { name: "tick", command: ["sh", "-c", "mkfifo /tick && exec 3<>/tick; i=0; while true; do echo $i; i=$((i+1)); read -t 1 x <&3; done"] }),
};
const POD_NAMES = Object.keys(PODS).map((name) => `${name}-${NODE_NAME}`);

const seconds = (since: number) => Math.round((Date.now() - since) / 1000);

interface SandboxItem {
  id: string;
  metadata: { name: string };
  state: string;
}

/** Every sandbox crictl lists; undefined while crictl gets no answer. */
async function listSandboxes(vm: VmNode): Promise<SandboxItem[] | undefined> {
  const listed = await vm.ssh(`${crictl} pods -o json`, { timeoutMs: 180_000 });
  if (listed.status !== 0) return undefined;
  return (JSON.parse(listed.stdout) as { items?: SandboxItem[] }).items ?? [];
}

/** Pod name → id of its ready sandbox with a running container, for each pod (none of them in OLD); undefined until all are. */
async function readyPods(vm: VmNode, old: Set<string> = new Set()): Promise<Map<string, string> | undefined> {
  const items = await listSandboxes(vm);
  if (!items) return undefined;
  const ready = new Map<string, string>();
  for (const name of POD_NAMES) {
    const sandbox = items.find((s) => s.metadata.name === name && s.state === "SANDBOX_READY" && !old.has(s.id));
    if (!sandbox) return undefined;
    const running = await vm.ssh(`${crictl} ps -q --state running --pod ${sandbox.id}`, { timeoutMs: 180_000 });
    if (running.status !== 0 || running.stdout.trim() === "") return undefined;
    ready.set(name, sandbox.id);
  }
  return ready;
}

/** Seconds since the guest's kernel booted. */
async function uptime(vm: VmNode): Promise<number> {
  return Math.round(Number((await vm.run("cat /proc/uptime")).split(" ")[0]));
}

/**
 * What is left of sandboxes other than READY's (the pods' current ones):
 * one line per finding, none when clean.
 */
async function leftovers(vm: VmNode, ready: Map<string, string>): Promise<string[]> {
  const current = new Set(ready.values());
  const found: string[] = [];
  // host-local keeps a file per reserved IP holding the container id, then the interface (CRLF between).
  const reserved = await vm.run(`for f in ${IPAM_STORE}/*/*; do [ -f "$f" ] || continue; case "\${f##*/}" in lock|last_reserved_ip*) ;; *) echo "\${f##*/} $(head -n1 "$f" | tr -d '\\r')";; esac; done`);
  const holders = reserved.split("\n").filter(Boolean).map((l) => l.split(" ") as [string, string]);
  for (const [ip, holder] of holders) if (!current.has(holder)) found.push(`IP ${ip} reserved for ${holder}, not a current sandbox`);
  for (const id of current) if (!holders.some(([, holder]) => holder === id)) found.push(`current sandbox ${id} holds no IP in the IPAM store`);
  const veths = Number((await vm.run("ip -o link show type veth | wc -l")).trim());
  if (veths !== current.size) found.push(`${veths} veths for ${current.size} pods`);
  const mounts = (await vm.run(`awk '$3 == "nsfs" {print $2}' /proc/mounts | grep '^${ROOT}/netns/' || true`)).split("\n").filter(Boolean);
  for (const m of mounts) if (!current.has(m.split("/").pop()!)) found.push(`netns mount ${m} of no current sandbox`);
  if (mounts.length !== current.size) found.push(`${mounts.length} netns mounts for ${current.size} pods`);
  const sandboxes = await listSandboxes(vm);
  if (!sandboxes) return [...found, "crictl pods got no answer"];
  const listed = new Set(sandboxes.map((s) => s.id));
  const records = (await vm.run(`for f in ${ROOT}/sandbox/*.json; do [ -f "$f" ] && { tr -d '\\n' <"$f"; echo; }; done`)).split("\n").filter(Boolean);
  for (const text of records) {
    const { data } = JSON.parse(text) as { data: { id: string; phase: string; network: { phase: string } } };
    if (!listed.has(data.id)) found.push(`checkpoint of sandbox ${data.id}, which crictl does not list`);
    else if (!current.has(data.id) && (data.phase !== "stopped" || data.network.phase === "attached" || data.network.phase === "attaching")) {
      found.push(`old sandbox ${data.id}: phase ${data.phase}, network ${data.network.phase} (not stopped and released)`);
    }
  }
  const running = new Set((await vm.run("docker ps -q --no-trunc")).split("\n").filter(Boolean));
  const followed = (await vm.run(`ls -l /proc/$(systemctl show -p MainPID --value cridock.service)/fd | grep -o '/var/lib/docker/containers/[0-9a-f]*' | sort -u || true`))
    .split("\n")
    .filter(Boolean)
    .map((p) => p.split("/").pop()!);
  for (const id of followed) if (!running.has(id)) found.push(`cridock still holds the log of container ${id}, which is not running`);
  const podContainers = (await vm.run(`docker ps --no-trunc --filter label=io.kubernetes.docker.type --format '{{.ID}} {{.Label "io.kubernetes.sandbox.id"}}'`)).split("\n").filter(Boolean);
  for (const line of podContainers) {
    const [id, sandbox] = line.split(" ");
    if (!current.has(id!) && !current.has(sandbox!)) found.push(`container ${id} of sandbox ${sandbox || id} still runs`);
  }
  return found;
}

/** cridock.service active, and how often systemd restarted it. */
async function cridockRestarts(vm: VmNode): Promise<{ active: boolean; restarts: number }> {
  const out = (await vm.run("systemctl show -p ActiveState -p NRestarts cridock.service")).trim();
  return { active: /ActiveState=active/.test(out), restarts: Number(/NRestarts=(\d+)/.exec(out)?.[1] ?? -1) };
}

/** Waits for both pods in new sandboxes after a boot; the seconds from the kernel's boot. */
async function bootToReady(t: Test, vm: VmNode, old: Map<string, string>): Promise<Map<string, string> | undefined> {
  const ready = await waitFor(() => readyPods(vm, new Set(old.values())), 20 * 60_000);
  if (!ready) {
    const logs = (await vm.ssh("journalctl -b -u kubelet --no-pager -o cat | grep -iE 'error|fail' | tail -n 15; journalctl -b -u cridock --no-pager -o cat | tail -n 15")).stdout;
    t.fail(`the pods did not come back in new sandboxes within 20 minutes of the boot\n${logs}`);
    return undefined;
  }
  t.pass(`both pods Ready in new sandboxes ${await uptime(vm)} s after the kernel booted`);
  return ready;
}

/** Leftovers, given kubelet and cridock a few minutes to clean up after the pods came back. */
async function checkClean(t: Test, vm: VmNode, ready: Map<string, string>): Promise<void> {
  let last: string[] = [];
  await waitFor(async () => {
    last = await leftovers(vm, ready);
    return last.length === 0 ? true : undefined;
  }, 300_000);
  t.same(last, [], "nothing left of the old boot's sandboxes: IPs, veths, netns mounts, checkpoints, log followers, containers");
  const cridock = await cridockRestarts(vm);
  t.ok(cridock.active, "cridock.service is active");
  t.equal(cridock.restarts, 0, "and systemd did not have to restart it");
}

if (!existsSync(KUBELET)) {
  t.plan(0, `${KUBELET} is missing: scripts/env/install-kubernetes.sh builds it`);
} else {
  // A shared node is left without kubelet and its pods for the next file.
  const { vm, deb, images } = await suiteSetup(t, "reboot", buildKubeletImages, async (vm) => {
    await removeKubeletUnit(vm);
    await vm.ssh(`rm -f ${MANIFESTS}/*; ${crictl} rmp -af; docker ps -aq --filter label=io.kubernetes.docker.type | xargs -r docker rm -f`, { timeoutMs: 600_000 });
  });

  /** The pods' current sandboxes, as each step leaves them. */
  let pods: Map<string, string> | undefined;

  t.test("kubelet as an enabled unit runs the static pods", async (t) => {
    const took = await prepareKubeletNode(vm, deb, images);
    t.comment(`.deb installed in ${took.deb} s, images loaded in ${took.images} s, kubelet copied in ${took.kubelet} s`);
    for (const [name, manifest] of Object.entries(PODS)) {
      await vm.run(`mkdir -p ${MANIFESTS} && cat >${MANIFESTS}/${name}.json`, { input: JSON.stringify(manifest, null, 2) });
    }
    const since = Date.now();
    await enableKubelet(vm, kubeletConfig());
    t.same((await vm.run("systemctl is-enabled kubelet.service cridock.service cridock.socket")).trim().split("\n"), ["enabled", "enabled", "enabled"], "kubelet, cridock and its socket start at boot");
    pods = await waitFor(() => readyPods(vm), 15 * 60_000);
    t.ok(pods, "both pods Ready");
    t.comment(`pods Ready ${seconds(since)} s after kubelet started`);
  });

  t.test("systemctl restart cridock: the same sandboxes, Ready again", async (t) => {
    if (!pods) return void t.fail("the pods never ran: nothing to restart or reboot under");
    const before = pods;
    const since = Date.now();
    await vm.run("systemctl restart cridock.service", { timeoutMs: 300_000 });
    const after = await waitFor(() => readyPods(vm), 10 * 60_000, 1000);
    t.same(after, before, "every pod Ready in the sandbox it had");
    t.comment(`from the restart to both pods Ready as cridock lists them: ${seconds(since)} s`);
  });

  t.test("a clean reboot (systemctl reboot)", async (t) => {
    if (!pods) return void t.fail("the pods never ran: nothing to restart or reboot under");
    const old = pods;
    const since = Date.now();
    await vm.reboot();
    t.comment(`down and up to ssh in ${seconds(since)} s`);
    pods = await bootToReady(t, vm, old);
    if (!pods) return;
    t.match(await vm.run("journalctl -b -u cridock --no-pager -o cat"), /the machine rebooted since cridock last ran/, "cridock saw the reboot and stopped the old sandboxes itself");
    await checkClean(t, vm, pods);
  });

  t.test("an unclean reboot (sysrq reset) with half-written files of cridock's own", async (t) => {
    if (!pods) return void t.fail("the pods never ran: nothing to restart or reboot under");
    const old = pods;
    const torn = "e".repeat(64);
    const tornLog = "f".repeat(64);
    const temp = `.${torn}.0badf00d.tmp`;
    await vm.run(
      `printf '{"version":1,"data":{"id":"${torn}","spec":' >${ROOT}/sandbox/${torn}.json && printf '{"version":1,"data":' >${ROOT}/sandbox/${temp} && ` +
        `mkdir -p ${ROOT}/logs && printf '{"containerId":"${tornLog}","logPa' >${ROOT}/logs/${tornLog}.json && sync`,
    );
    const since = Date.now();
    await vm.reboot({ crash: true });
    t.comment(`reset and up to ssh in ${seconds(since)} s`);
    pods = await bootToReady(t, vm, old);
    if (!pods) return;
    const journal = await vm.run("journalctl -b -u cridock --no-pager -o cat");
    t.match(journal, /set aside a corrupt sandbox checkpoint/, "a warning for the torn sandbox checkpoint");
    t.match(journal, /set aside an unreadable log position/, "a warning for the torn log position");
    t.match(await vm.run(`ls ${ROOT}/sandbox/corrupt`), new RegExp(`^${torn}\\.json\\.`, "m"), "the torn checkpoint set aside in sandbox/corrupt/");
    t.match(await vm.run(`ls ${ROOT}/logs/corrupt`), new RegExp(`^${tornLog}\\.json\\.`, "m"), "the torn log position set aside in logs/corrupt/");
    t.equal((await vm.run(`ls -a ${ROOT}/sandbox | grep -c '\\.tmp$' || true`)).trim(), "0", "the temporary file removed");
    await checkClean(t, vm, pods);
  });
}
