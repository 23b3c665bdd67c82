/**
 * CheckpointPod and RestorePod for real (cri-api v0.37, KEP-5823), on the
 * cgroup v2 node of scripts/vm/node.sh with dockerd in experimental mode and
 * CRIU configured as docs/node-features.md says (daemon.json and
 * /etc/criu/runc.conf put back as they were at the end). crictl has no verb
 * for these RPCs: they are called with scripts/ops/pod-checkpoint.ts, run
 * on the host against the guest's cridock socket (forwarded over ssh), as
 * docs/operating.md tells an operator.
 *
 * A pod of two containers: `count` writes a counter to its stdout every
 * 0.2 s, `side` appends a line to a file in its root filesystem every
 * second. Then
 * - CheckpointPod: both run on; the archive holds pod.json and each
 *   container's archive; the time and the archive's size are printed;
 * - the pod removed, RestorePod from the archive: a new sandbox with an IP,
 *   both containers CREATED; StartContainer resumes them: the counter goes
 *   on from its checkpoint (not from 1), the side file from its lines; the
 *   time is printed;
 * - CheckpointPod with a deadline that passes in the middle (after the
 *   pause, Docker's events show it): DEADLINE_EXCEEDED, every container
 *   runs on unpaused, nothing at the path, no temporary file, no work
 *   directory;
 * - RestorePod of an archive whose second container's checkpoint lacks
 *   CRIU's inventory: INVALID_ARGUMENT naming it, and no sandbox,
 *   container, IP, netns handle or mount is left.
 */
import t from "tap";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CRICTL, REGISTRY } from "../helpers/env.ts";
import { REPO_ROOT } from "../helpers/cridock-process.ts";
import { ensureDebInstalled, loadImage, runCommand, suiteSetup, waitFor, writeImageArchive, writePauseArchive, type RunResult, type VmNode } from "../helpers/vm-node.ts";
import { forwardGuestSocket } from "../helpers/vm-socket.ts";
import { busyboxEntries, userlandEntries } from "../../scripts/env/images/rootfs.ts";

const BUSYBOX = `${REGISTRY}/cridock-test/busybox-podckpt:1`;
const DAEMON_JSON = "/etc/docker/daemon.json";
const crictl = "crictl --runtime-endpoint unix:///var/run/cridock.sock --timeout 900s";
const COUNT = "i=0; while true; do i=$((i+1)); echo $i; sleep 0.2; done";
const SIDE = "j=0; while true; do j=$((j+1)); echo side-$j >>/side.txt; sleep 1; done";
const POD = "podck";
const CNI_NETWORKS = "/var/lib/cni/networks";

const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const output = (r: RunResult) => (r.stdout + r.stderr).trim();

async function buildImages(dir: string): Promise<string[]> {
  const archives = [join(dir, "pause.tar"), join(dir, "busybox.tar")];
  await writePauseArchive(archives[0]!);
  await writeImageArchive(archives[1]!, [...busyboxEntries(["sh", "sleep", "cat", "tail", "echo"]), ...userlandEntries()], { Cmd: ["sh"], Env: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] }, [BUSYBOX]);
  return archives;
}

const skip = existsSync(CRICTL) ? false : `${CRICTL} is missing (scripts/env/install-cri-tools.sh builds it)`;
if (skip) {
  t.plan(0, skip);
} else {
  const { vm, deb, images } = await suiteSetup(t, "podckpt", buildImages);
  const original = await vm.ssh(`cat ${DAEMON_JSON}`);
  const hadConfig = original.status === 0;
  t.teardown(async () => {
    await vm.ssh(`${crictl} rmp -fa; rm -rf /root/podckpt /root/*.tar /root/*.tar.tmp-* /etc/criu/runc.conf`, { timeoutMs: 600_000 });
    if (hadConfig) await vm.run(`cat >${DAEMON_JSON}`, { input: original.stdout });
    else await vm.run(`rm -f ${DAEMON_JSON}`);
    await vm.ssh("systemctl restart docker; systemctl start cridock.socket cridock.service", { timeoutMs: 600_000 });
  });
  const scratch = await mkdtemp(join(tmpdir(), "cridock-podckpt-"));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const socket = await forwardGuestSocket(vm.name, "/var/run/cridock.sock");
  t.teardown(() => socket.close());

  /** scripts/ops/pod-checkpoint.ts against the guest's cridock: its JSON answer, or its error output. */
  async function client(args: string[], timeoutSeconds = 1200): Promise<{ ok: true; answer: Record<string, any> } | { ok: false; error: string }> {
    const r = await runCommand(join(REPO_ROOT, "node_modules/.bin/tsx"), ["scripts/ops/pod-checkpoint.ts", "--endpoint", `unix://${socket.path}`, "--timeout", String(timeoutSeconds), ...args], {
      timeoutMs: (timeoutSeconds + 120) * 1000,
    });
    if (r.status === 0) return { ok: true, answer: JSON.parse(r.stdout) as Record<string, any> };
    return { ok: false, error: output(r) };
  }

  async function state(id: string): Promise<string> {
    return (JSON.parse(await vm.run(`${crictl} inspect ${id}`, { timeoutMs: 180_000 })) as { status: { state: string } }).status.state;
  }
  async function lastCount(id: string): Promise<number> {
    const r = await vm.ssh(`${crictl} logs --tail 1 ${id}`, { timeoutMs: 180_000 });
    return Number(r.stdout.trim().split("\n").at(-1) || 0) || 0;
  }
  async function podIp(pod: string): Promise<string> {
    return (JSON.parse(await vm.run(`${crictl} inspectp ${pod}`, { timeoutMs: 180_000 })) as { status: { network: { ip: string } } }).status.network.ip;
  }
  async function containersOf(pod: string): Promise<Record<string, string>> {
    const list = JSON.parse(await vm.run(`${crictl} ps -a -p ${pod} -o json`, { timeoutMs: 180_000 })) as { containers: { id: string; metadata: { name: string } }[] };
    return Object.fromEntries(list.containers.map((c) => [c.metadata.name, c.id]));
  }
  /** What a restore could leave: sandboxes, containers, IPs, netns handles, mounts of cridock's root. */
  async function footprint(): Promise<Record<string, string>> {
    const run = async (cmd: string) => (await vm.ssh(cmd, { timeoutMs: 180_000 })).stdout.trim();
    return {
      pods: await run(`${crictl} pods -q | sort`),
      containers: await run("docker ps -aq --no-trunc | sort"),
      ips: await run(`find ${CNI_NETWORKS} -type f ! -name 'last_reserved_ip*' ! -name lock 2>/dev/null | sort`),
      netns: await run("ls /var/lib/cridock/netns 2>/dev/null | sort"),
      mounts: await run("grep -c /var/lib/cridock/ /proc/self/mountinfo || true"),
      work: await run("ls -A /var/lib/cridock/checkpoint-work 2>/dev/null"),
    };
  }

  t.test("the node: cridock from its .deb, dockerd in experimental mode, criu configured, the images", async (t) => {
    await ensureDebInstalled(vm, deb);
    t.match(await vm.run("criu check 2>&1", { timeoutMs: 300_000 }), /Looks good/, "criu check: Looks good");
    const config = hadConfig && original.stdout.trim() ? (JSON.parse(original.stdout) as Record<string, unknown>) : {};
    await vm.run(`mkdir -p /etc/docker && cat >${DAEMON_JSON}`, { input: JSON.stringify({ ...config, experimental: true }, null, 2) });
    await vm.run("mkdir -p /etc/criu && printf '%s\\n' manage-cgroups=ignore >/etc/criu/runc.conf");
    await vm.run("systemctl restart docker && systemctl start cridock.socket cridock.service", { timeoutMs: 600_000 });
    t.equal((await vm.run("docker info --format '{{.ExperimentalBuild}}'", { timeoutMs: 300_000 })).trim(), "true", "dockerd runs in experimental mode");
    for (const archive of images) await loadImage(vm, archive);
    await vm.copy(CRICTL, "/usr/local/bin/crictl");
    t.ok(await waitFor(async () => ((await vm.ssh(`${crictl} info`, { timeoutMs: 180_000 })).status === 0 ? true : undefined), 300_000), "crictl reaches cridock");
    const check = await vm.ssh("cridock check", { timeoutMs: 300_000 });
    t.match(check.stdout, /^OK +checkpoint +CheckpointContainer, CheckpointPod and RestorePod are served/m, "cridock check says the node can", { output: output(check) });
  });

  let pod = "";
  let oldIp = "";
  let before = 0;
  let atCheckpoint = 0;
  let sideLines = 0;

  t.test("CheckpointPod: both containers run on, one archive with the manifest and each container's checkpoint", async (t) => {
    const podConfig = { metadata: { name: POD, namespace: "default", uid: `${POD}-uid`, attempt: 0 }, log_directory: `/var/log/pods/${POD}`, linux: {} };
    const ctr = (name: string, script: string) => ({ metadata: { name, attempt: 0 }, image: { image: BUSYBOX }, command: ["sh", "-c", script], log_path: `${name}.log` });
    await vm.run(`mkdir -p /root/podckpt /var/log/pods/${POD} && cat >/root/podckpt/pod.json`, { input: JSON.stringify(podConfig) });
    await vm.run("cat >/root/podckpt/count.json", { input: JSON.stringify(ctr("count", COUNT)) });
    await vm.run("cat >/root/podckpt/side.json", { input: JSON.stringify(ctr("side", SIDE)) });
    pod = (await vm.run(`${crictl} runp /root/podckpt/pod.json`, { timeoutMs: 600_000 })).trim();
    oldIp = await podIp(pod);
    for (const name of ["count", "side"]) {
      const id = (await vm.run(`${crictl} create ${pod} /root/podckpt/${name}.json /root/podckpt/pod.json`, { timeoutMs: 600_000 })).trim();
      await vm.run(`${crictl} start ${id}`, { timeoutMs: 600_000 });
    }
    const ids = await containersOf(pod);
    t.ok(await waitFor(async () => ((await lastCount(ids.count!)) >= 5 ? true : undefined), 300_000), "the counter counts");
    before = await lastCount(ids.count!);
    const since = Date.now();
    const r = await client(["checkpoint", pod, "/root/pod.tar"]);
    const took = seconds(since);
    if (!r.ok) {
      t.fail("CheckpointPod failed", { error: r.error, cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 30")) });
      return;
    }
    atCheckpoint = await lastCount(ids.count!);
    sideLines = Number((await vm.run(`${crictl} exec ${ids.side} sh -c 'cat /side.txt' | wc -l`, { timeoutMs: 300_000 })).trim());
    const bytes = Number((await vm.run("stat -c %s /root/pod.tar")).trim());
    t.comment(`CheckpointPod of 2 containers: ${took} end to end (the call: ${r.answer.ms} ms); archive ${bytes} bytes (${(bytes / 1048576).toFixed(1)} MiB)`);
    const logged = await vm.ssh("journalctl -u cridock --no-pager -o cat | grep 'checkpointed pod' | tail -n 1");
    t.comment(`cridock: ${logged.stdout.trim().slice(0, 400)}`);
    t.same([await state(ids.count!), await state(ids.side!)], ["CONTAINER_RUNNING", "CONTAINER_RUNNING"], "both still run");
    t.equal((await vm.run(`docker inspect --format '{{.State.Paused}}' ${ids.count} ${ids.side}`)).trim(), "false\nfalse", "neither is left paused");
    t.ok(await waitFor(async () => ((await lastCount(ids.count!)) > atCheckpoint + 2 ? true : undefined), 300_000), "the counter counts on");
    const names = (await vm.run("tar -tf /root/pod.tar")).trim().split("\n");
    t.same(names, ["pod.json", "containers/count.tar", "containers/side.tar"], "the manifest, then each container's archive");
    const manifest = JSON.parse(await vm.run("tar -xOf /root/pod.tar pod.json")) as Record<string, any>;
    t.match(manifest, { kind: "cridock.pod-checkpoint", version: 1, sandbox: { id: pod, spec: { metadata: { name: POD, uid: `${POD}-uid` } } }, containers: [{ name: "count", id: ids.count }, { name: "side", id: ids.side }] });
    t.match(await vm.run("tar -xOf /root/pod.tar containers/count.tar | tar -t"), /^checkpoint\/inventory\.img$/m, "a container's archive is CheckpointContainer's");
    t.equal((await vm.run("stat -c %a /root/pod.tar")).trim(), "600", "readable by root alone");
    t.equal((await vm.run("ls -A /var/lib/cridock/checkpoint-work; ls /root | grep -c tmp- || true")).trim(), "0", "no work directory, no temporary archive");
  });

  let restoredPod = "";

  t.test("RestorePod after the pod is removed: a new sandbox, both containers CREATED; StartContainer resumes them where they were", async (t) => {
    if ((await vm.ssh("test -f /root/pod.tar")).status !== 0) {
      t.fail("no archive: the checkpoint failed");
      return;
    }
    await vm.run(`${crictl} stopp ${pod} && ${crictl} rmp ${pod}`, { timeoutMs: 600_000 });
    // The restored pod writes its logs where the removed one did: its old output goes first.
    await vm.run(`rm -f /var/log/pods/${POD}/*`);
    let since = Date.now();
    const r = await client(["restore", "/root/pod.tar"]);
    const took = seconds(since);
    if (!r.ok) {
      t.fail("RestorePod failed", { error: r.error, cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 30")) });
      return;
    }
    restoredPod = r.answer.podSandboxId as string;
    const restored = Object.fromEntries((r.answer.restoredContainers as { name: string; containerId: string }[]).map((c) => [c.name, c.containerId]));
    t.comment(`RestorePod of 2 containers (sandbox and creates): ${took} end to end (the call: ${r.answer.ms} ms)`);
    t.not(restoredPod, pod, "a new sandbox");
    t.same(Object.keys(restored).sort(), ["count", "side"]);
    const ip = await podIp(restoredPod);
    t.match(ip, /^\d+\.\d+\.\d+\.\d+$/, "the new sandbox has an IP of its own from CNI");
    t.comment(`pod IP before ${oldIp}, after ${ip}`);
    t.same([await state(restored.count!), await state(restored.side!)], ["CONTAINER_CREATED", "CONTAINER_CREATED"], "both CREATED, nothing restored yet");
    since = Date.now();
    for (const name of ["count", "side"]) {
      const started = await vm.ssh(`${crictl} start ${restored[name]}`, { timeoutMs: 600_000 });
      t.equal(started.status, 0, `StartContainer ${name} (CRIU's restore)`, { output: output(started) });
    }
    t.comment(`both containers' processes restored by StartContainer in ${seconds(since)}`);
    t.same([await state(restored.count!), await state(restored.side!)], ["CONTAINER_RUNNING", "CONTAINER_RUNNING"], "both run");
    const first = await waitFor(async () => {
      const out = await vm.ssh(`${crictl} logs ${restored.count} 2>/dev/null | head -n 1`, { timeoutMs: 180_000 });
      return Number(out.stdout.trim()) || undefined;
    }, 300_000);
    t.ok(first !== undefined && first > before && first <= atCheckpoint + 1, `the counter goes on from its checkpoint: first line ${first}, the checkpoint was taken between ${before} and ${atCheckpoint}`);
    t.ok(await waitFor(async () => ((await lastCount(restored.count!)) > (first ?? 0) + 5 ? true : undefined), 300_000), "and keeps counting");
    const side = await waitFor(async () => {
      const lines = (await vm.ssh(`${crictl} exec ${restored.side} cat /side.txt`, { timeoutMs: 300_000 })).stdout.trim().split("\n");
      return lines.length > sideLines ? lines : undefined;
    }, 300_000);
    t.ok(side && side[0] === "side-1" && side.length > sideLines, `the side file goes on from its ${sideLines} lines (${side?.length} now)`);
  });

  t.test("CheckpointPod whose deadline passes in the middle: every container runs on, nothing is written", async (t) => {
    if (!restoredPod) {
      t.fail("no restored pod to checkpoint");
      return;
    }
    const ids = Object.values(await containersOf(restoredPod));
    let caught: { deadline: number; error: string; events: string } | undefined;
    // The deadline must pass after the pause (the call crosses ssh first): longer ones until Docker's events show a pause.
    for (const deadline of [3, 6, 12, 24]) {
      const since = Math.floor(Date.now() / 1000) - 1;
      const r = await client(["checkpoint", restoredPod, "/root/late.tar"], deadline);
      if (r.ok) {
        t.comment(`a deadline of ${deadline} s was long enough for the whole checkpoint`);
        await vm.run("rm -f /root/late.tar");
        break;
      }
      // The server resumes once the dump in flight has ended: wait for the unpauses.
      await waitFor(async () => ((await vm.run(`docker inspect --format '{{.State.Paused}}' ${ids.join(" ")}`)).includes("true") ? undefined : true), 600_000);
      const events = (await vm.run(`docker events --since ${since} --until $(date +%s) --filter event=pause --filter event=unpause --format '{{.Action}} {{.Actor.ID}}'`, { timeoutMs: 300_000 })).trim();
      if (events.includes("pause")) {
        caught = { deadline, error: r.error, events };
        break;
      }
      t.comment(`a deadline of ${deadline} s passed before anything was paused: ${r.error}`);
    }
    if (!caught) {
      t.fail("no deadline passed in the middle of a checkpoint");
      return;
    }
    t.comment(`deadline ${caught.deadline} s: ${caught.error}`);
    t.match(caught.error, /DEADLINE_EXCEEDED/, "the call fails with DEADLINE_EXCEEDED");
    for (const id of ids) {
      t.match(caught.events, new RegExp(`^pause ${id}`, "m"), `${id.slice(0, 12)} was paused`);
      t.match(caught.events, new RegExp(`^unpause ${id}`, "m"), `and resumed`);
    }
    t.same(await Promise.all(ids.map(state)), ["CONTAINER_RUNNING", "CONTAINER_RUNNING"], "every container runs on");
    t.equal((await vm.run(`docker inspect --format '{{.State.Paused}}' ${ids.join(" ")}`)).trim(), "false\nfalse", "none is left paused");
    const count = (await containersOf(restoredPod)).count!;
    const n = await lastCount(count);
    t.ok(await waitFor(async () => ((await lastCount(count)) > n + 2 ? true : undefined), 300_000), "the counter counts on");
    t.equal((await vm.ssh("test -e /root/late.tar")).status, 1, "nothing at the path");
    t.ok(await waitFor(async () => ((await vm.run("ls -A /var/lib/cridock/checkpoint-work; ls /root | grep -c tmp- || true")).trim() === "0" ? true : undefined), 300_000), "no temporary file, no work directory");
    const logged = await vm.ssh("journalctl -u cridock --no-pager -o cat | grep -m1 -o 'the deadline passed while[^\"]*'");
    t.comment(`cridock: ${logged.stdout.trim()}`);
  });

  t.test("RestorePod failing at its second container: no sandbox, container, IP, netns handle or mount left", async (t) => {
    if ((await vm.ssh("test -f /root/pod.tar")).status !== 0) {
      t.fail("no archive: the checkpoint failed");
      return;
    }
    // The second container's checkpoint without CRIU's inventory: found when that container is created.
    await vm.run(
      [
        "set -e",
        "d=$(mktemp -d) && cd $d",
        "tar -xf /root/pod.tar",
        "mkdir s && tar -C s -xf containers/side.tar && rm s/checkpoint/inventory.img",
        "(cd s && tar -cf ../containers/side.tar *)",
        "tar -cf /root/broken.tar pod.json containers/count.tar containers/side.tar",
        "cd / && rm -rf $d",
      ].join("\n"),
      { timeoutMs: 600_000 },
    );
    const config = join(scratch, "broken-pod.json");
    await writeFile(config, JSON.stringify({ metadata: { name: "broken", namespace: "default", uid: "broken-uid", attempt: 0 }, log_directory: "/var/log/pods/broken", linux: {} }));
    await vm.run("mkdir -p /var/log/pods/broken");
    const beforeRestore = await footprint();
    const startedAt = Math.floor(Date.now() / 1000) - 1;
    const r = await client(["restore", "/root/broken.tar", "--config", config]);
    if (r.ok) {
      t.fail("RestorePod of a broken archive succeeded", { answer: r.answer });
      return;
    }
    t.match(r.error, /INVALID_ARGUMENT: .*container side of pod checkpoint \/root\/broken\.tar is not a usable checkpoint archive: it has no checkpoint\/inventory\.img/, "INVALID_ARGUMENT naming the container and what its checkpoint lacks", { error: r.error });
    const journal = (await vm.ssh(`journalctl -u cridock --no-pager -o cat --since @${startedAt} | grep -E 'created container|pod sandbox removed'`)).stdout;
    t.match(journal, /k8s_count_broken_default_broken-uid_0/, "the sandbox and the first container had been made", { journal });
    t.match(journal, /pod sandbox removed/, "and were removed", { journal });
    t.same(await footprint(), beforeRestore, "no sandbox, container, IP, netns handle, mount or work file left");
  });
}
