/**
 * CheckpointContainer for real (KEP-2008, as kubelet's
 * POST /checkpoint/{namespace}/{pod}/{container} asks it), on the cgroup v2
 * node of scripts/vm/node.sh (the release's kernel and criu; its docker.io
 * or Engine 29, as CRIDOCK_VM_ENGINE picks) switched to experimental mode ("experimental": true in
 * /etc/docker/daemon.json; put back as it was at the end, as the node is
 * shared by the suite's files). CRIU cannot work on the test host's kernel,
 * so this is the only place a dump happens.
 *
 * Through crictl, on the .deb's cridock: a pod with a container that has
 * changed its root filesystem (a file added, one deleted) and counts in a
 * shell variable; `crictl checkpoint --export=/root/c.tar` then
 * - the container still runs and counts on;
 * - the archive holds config.dump, spec.dump, CRIU's images under
 *   checkpoint/, rootfs-diff.tar with the added file and deleted.files with
 *   the deleted one; nothing else is left (no temporary archive, no dump
 *   directory under /var/lib/cridock/checkpoint-work);
 * - `checkpointctl show` reads it (checkpointctl built by
 *   `scripts/env/install-cri-tools.sh checkpointctl`; skipped without it);
 * - `crictl create` with the archive's path as the image, in a new pod,
 *   then `crictl start`: the counter is restored, and counts on from the
 *   number in its memory (a fresh start would count from 1), with the file
 *   it added and without the one it deleted, beside the original; a missing
 *   archive is NOT_FOUND and a file that is no archive INVALID_ARGUMENT;
 * - the stopped container is FAILED_PRECONDITION, and nothing is written;
 * - a pod on the host's network: either checkpointed, or refused with
 *   FAILED_PRECONDITION naming the host's network namespace (which one is
 *   said in a comment: it depends on CRIU);
 * - kubelet restores from a checkpoint image, the only way it can ask
 *   for a restore: a counter run by kubelet as a static pod is
 *   checkpointed, the archive made into the image `checkpointctl build`
 *   makes (FROM scratch, the archive as its one layer; loaded into
 *   Docker's classic store, which keeps no manifest annotations), and a
 *   second static pod naming that image runs the counter on from the
 *   number in its memory, in its own cgroup, not restarted by kubelet
 *   (last: kubelet stops the crictl pods it does not know of).
 */
import t, { type Test } from "tap";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CRI_TOOLS_BIN_DIR, CRICTL, DEFAULT_PAUSE_IMAGE, REGISTRY } from "../helpers/env.ts";
import { ensureDebInstalled, loadImage, shellQuote, suiteSetup, waitFor, writeImageArchive, writePauseArchive, type RunResult, type VmNode } from "../helpers/vm-node.ts";
import { KUBELET, kubeletConfig, MANIFESTS, NODE_NAME, READ_ONLY_PORT, startKubelet } from "../helpers/vm-kubelet.ts";
import { busyboxEntries, userlandEntries } from "../../scripts/env/images/rootfs.ts";

const CHECKPOINTCTL = join(CRI_TOOLS_BIN_DIR, "checkpointctl");
const BUSYBOX = `${REGISTRY}/cridock-test/busybox-checkpoint:1`;
const DAEMON_JSON = "/etc/docker/daemon.json";
const crictl = "crictl --runtime-endpoint unix:///var/run/cridock.sock --timeout 900s";
/** What the counter does first: a file added, one of the image's deleted; then it counts in memory. */
const COUNTER = "echo checkpointed >/etc/cridock-marker; rm /etc/group; i=0; while true; do i=$((i+1)); echo $i; sleep 1; done";

/** The checkpoint image the kubelet subtest builds in the guest and names in a static pod. */
const CHECKPOINT_IMAGE = `${REGISTRY}/cridock-test/count-checkpoint:1`;

/**
 * Shell for the guest: a `docker load` of the image `checkpointctl build`
 * makes from ARCHIVE (FROM scratch, nothing to run, the archive's members as
 * its one layer: the archive is that layer's tar), tagged TAG.
 */
function loadCheckpointImage(archive: string, tag: string): string {
  return [
    "set -e",
    "d=$(mktemp -d)",
    `cp ${shellQuote(archive)} "$d/layer.tar"`,
    `diff="sha256:$(sha256sum "$d/layer.tar" | cut -d' ' -f1)"`,
    `printf '{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["%s"]}}' "$diff" >"$d/config.json"`,
    `printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' ${shellQuote(tag)} >"$d/manifest.json"`,
    `tar -C "$d" -cf - manifest.json config.json layer.tar | docker load --quiet`,
    `rm -rf "$d"`,
  ].join("\n");
}

/** What docs/node-features.md tells an operator to put in /etc/criu/runc.conf for restores on cgroup v2. */
const CRIU_RUNC_CONF = "manage-cgroups=ignore";

/** The node's CRIU configured for restores as docs/node-features.md says (removed at the end of the file). */
async function configureCriu(vm: VmNode): Promise<void> {
  await vm.run(`mkdir -p /etc/criu && printf '%s\\n' '${CRIU_RUNC_CONF}' >/etc/criu/runc.conf`);
}

const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;
const output = (r: RunResult) => (r.stdout + r.stderr).trim();

function podConfig(name: string, hostNetwork = false): Record<string, unknown> {
  return {
    metadata: { name, namespace: "default", uid: `${name}-uid`, attempt: 0 },
    log_directory: `/var/log/pods/${name}`,
    linux: hostNetwork ? { security_context: { namespace_options: { network: 2 } } } : {},
  };
}

const containerConfig = {
  metadata: { name: "count", attempt: 0 },
  image: { image: BUSYBOX },
  command: ["sh", "-c", COUNTER],
  log_path: "count.log",
};

async function buildImages(dir: string): Promise<string[]> {
  const archives = [join(dir, "pause.tar"), join(dir, "busybox.tar")];
  await writePauseArchive(archives[0]!);
  await writeImageArchive(archives[1]!, [...busyboxEntries(["sh", "sleep", "rm", "cat"]), ...userlandEntries()], { Cmd: ["sh"], Env: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] }, [BUSYBOX]);
  return archives;
}

/** Runs a pod with the counter through crictl; its pod and container ids once the counter has counted. */
async function runCounter(vm: VmNode, name: string, hostNetwork = false): Promise<{ pod: string; container: string }> {
  await vm.run(`mkdir -p /root/ckpt /var/log/pods/${name} && cat >/root/ckpt/${name}-pod.json`, { input: JSON.stringify(podConfig(name, hostNetwork)) });
  await vm.run(`cat >/root/ckpt/${name}-ctr.json`, { input: JSON.stringify(containerConfig) });
  const pod = (await vm.run(`${crictl} runp /root/ckpt/${name}-pod.json`, { timeoutMs: 600_000 })).trim();
  const container = (await vm.run(`${crictl} create ${pod} /root/ckpt/${name}-ctr.json /root/ckpt/${name}-pod.json`, { timeoutMs: 600_000 })).trim();
  await vm.run(`${crictl} start ${container}`, { timeoutMs: 600_000 });
  await waitFor(async () => ((await lastCount(vm, container)) >= 3 ? true : undefined), 300_000);
  return { pod, container };
}

/** The counter's last number in its CRI log (0 when none yet). */
async function lastCount(vm: VmNode, container: string): Promise<number> {
  const r = await vm.ssh(`${crictl} logs --tail 1 ${container}`, { timeoutMs: 180_000 });
  return Number(r.stdout.trim().split("\n").at(-1) || 0) || 0;
}

/**
 * The version of the runc that containerd's shim runs (the one on
 * containerd.service's PATH, which vm/engine.sh sets for Engine 29's runc),
 * as [major, minor, patch].
 */
async function shimRuncVersion(vm: VmNode): Promise<number[]> {
  const out = await vm.run(
    `eval "$(systemctl show containerd -p Environment --value | tr ' ' '\\n' | sed -n 's/^PATH=/export PATH=/p')"; runc --version | head -n 1`,
  );
  const match = /runc version (\d+)\.(\d+)\.(\d+)/.exec(out);
  if (!match) throw new Error(`no runc version in: ${out}`);
  return match.slice(1).map(Number);
}

async function state(vm: VmNode, container: string): Promise<string> {
  return (JSON.parse(await vm.run(`${crictl} inspect ${container}`, { timeoutMs: 180_000 })) as { status: { state: string } }).status.state;
}

const skip = existsSync(CRICTL) ? false : `${CRICTL} is missing (scripts/env/install-cri-tools.sh builds it)`;
if (skip) {
  t.plan(0, skip);
} else {
  const { vm, deb, images } = await suiteSetup(t, "checkpoint", buildImages);

  // dockerd's configuration as this file found it, put back (and docker restarted) at the end.
  const original = await vm.ssh(`cat ${DAEMON_JSON}`);
  const hadConfig = original.status === 0;
  t.teardown(async () => {
    await vm.ssh(`${crictl} rmp -fa; rm -rf /root/ckpt /root/*.tar /root/*.tar.tmp-* /etc/criu/runc.conf`, { timeoutMs: 600_000 });
    if (hadConfig) await vm.run(`cat >${DAEMON_JSON}`, { input: original.stdout });
    else await vm.run(`rm -f ${DAEMON_JSON}`);
    await vm.ssh("systemctl restart docker; systemctl start cridock.socket cridock.service", { timeoutMs: 600_000 });
  });

  t.test("the node: cridock from its .deb, dockerd in experimental mode, criu, the images", async (t) => {
    let since = Date.now();
    await ensureDebInstalled(vm, deb);
    t.comment(`.deb installed in ${seconds(since)}`);
    t.match(await vm.run("criu check 2>&1", { timeoutMs: 300_000 }), /Looks good/, "criu check: Looks good");
    since = Date.now();
    const config = hadConfig && original.stdout.trim() ? (JSON.parse(original.stdout) as Record<string, unknown>) : {};
    await vm.run(`mkdir -p /etc/docker && cat >${DAEMON_JSON}`, { input: JSON.stringify({ ...config, experimental: true }, null, 2) });
    // cridock rides through Docker's restart (it only wants docker.service); started in case it was not running.
    await vm.run("systemctl restart docker && systemctl start cridock.socket cridock.service", { timeoutMs: 600_000 });
    t.equal((await vm.run("docker info --format '{{.ExperimentalBuild}}'", { timeoutMs: 300_000 })).trim(), "true", "dockerd runs in experimental mode");
    t.comment(`docker restarted in ${seconds(since)}`);
    since = Date.now();
    for (const archive of images) await loadImage(vm, archive);
    await vm.copy(CRICTL, "/usr/local/bin/crictl");
    t.comment(`images and crictl in the guest in ${seconds(since)}`);
    const ready = await waitFor(async () => ((await vm.ssh(`${crictl} info`, { timeoutMs: 180_000 })).status === 0 ? true : undefined), 300_000);
    t.ok(ready, "crictl reaches cridock");
    t.match(await vm.run("docker image ls --format '{{.Repository}}:{{.Tag}}'"), DEFAULT_PAUSE_IMAGE, "the pause image is loaded");
  });

  let counter: { pod: string; container: string } | undefined;
  /** The counter's last number once the checkpoint had returned: the dump caught a number up to this. */
  let atCheckpoint = 0;
  let beforeCheckpoint = 0;

  t.test("crictl checkpoint --export: the container runs on, the archive is checkpointctl's", async (t) => {
    counter = await runCounter(vm, "ckpt");
    const before = await lastCount(vm, counter.container);
    const since = Date.now();
    const r = await vm.ssh(`${crictl} checkpoint --export=/root/c.tar ${counter.container}`, { timeoutMs: 1_200_000 });
    const took = seconds(since);
    if (r.status !== 0) {
      t.fail("crictl checkpoint failed", { output: output(r), cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 20")) });
      return;
    }
    beforeCheckpoint = before;
    atCheckpoint = await lastCount(vm, counter.container);
    t.comment(`checkpointed in ${took}`);
    t.equal(await state(vm, counter.container), "CONTAINER_RUNNING", "the container still runs");
    const after = await waitFor(async () => {
      const n = await lastCount(vm, counter!.container);
      return n > before + 2 ? n : undefined;
    }, 300_000);
    t.ok(after, `it counts on (${before} before the checkpoint, ${after} after)`);

    const names = (await vm.run("tar -tf /root/c.tar")).trim().split("\n");
    t.comment(`${names.length} entries, ${(await vm.run("stat -c %s /root/c.tar")).trim()} bytes`);
    for (const name of ["config.dump", "spec.dump", "checkpoint/", "checkpoint/inventory.img", "rootfs-diff.tar", "deleted.files"]) t.ok(names.includes(name), name, { names });
    t.ok(names.some((n) => /^checkpoint\/pages-\d+\.img$/.test(n)), "CRIU's memory pages", { names });
    const config = JSON.parse(await vm.run("tar -xOf /root/c.tar config.dump")) as Record<string, unknown>;
    t.match(config, { id: counter.container, name: /^k8s_count_ckpt_default_ckpt-uid_0$/, rootfsImage: BUSYBOX, rootfsImageRef: /^sha256:/, runtime: "runc", restored: false });
    const spec = JSON.parse(await vm.run("tar -xOf /root/c.tar spec.dump")) as { annotations: Record<string, string>; linux?: unknown };
    t.match(spec.annotations, { "io.kubernetes.cri.container-name": "count", "io.kubernetes.cri.sandbox-name": "ckpt", "io.kubernetes.cri.sandbox-namespace": "default" });
    t.ok(spec.linux, "the spec is the one Docker ran the container with (containerd's bundle: one built from the inspect has no linux section)");
    const diff = (await vm.run("tar -xOf /root/c.tar rootfs-diff.tar | tar -t")).split("\n").filter(Boolean);
    t.ok(diff.includes("etc/cridock-marker"), "rootfs-diff.tar holds the added file", { found: diff.join(" ") });
    t.same(JSON.parse(await vm.run("tar -xOf /root/c.tar deleted.files")), ["/etc/group"], "deleted.files names the deleted one");
    t.equal((await vm.run("ls -A /var/lib/cridock/checkpoint-work; ls /root | grep -c tmp- || true")).trim(), "0", "no dump directory, no temporary archive");
    t.equal((await vm.run("stat -c %a /root/c.tar")).trim(), "600", "readable by root alone");
  });

  t.test("checkpointctl show reads the archive", { skip: existsSync(CHECKPOINTCTL) ? false : `${CHECKPOINTCTL} is missing: scripts/env/install-cri-tools.sh checkpointctl builds it` }, async (t) => {
    if ((await vm.ssh("test -f /root/c.tar")).status !== 0) {
      t.fail("no archive: the checkpoint failed");
      return;
    }
    await vm.copy(CHECKPOINTCTL, "/usr/local/bin/checkpointctl");
    const show = await vm.ssh("checkpointctl show /root/c.tar", { timeoutMs: 300_000 });
    t.equal(show.status, 0, "checkpointctl show exits 0", { output: output(show) });
    t.match(show.stdout, /count\s+\S*busybox-checkpoint:1/, "the container and its image", { output: show.stdout });
    const tree = await vm.ssh("checkpointctl inspect --ps-tree /root/c.tar", { timeoutMs: 300_000 });
    t.equal(tree.status, 0, "checkpointctl inspect --ps-tree reads CRIU's images", { output: output(tree) });
    t.match(tree.stdout, /sleep|sh/, "the counter's processes", { output: tree.stdout });
  });

  /**
   * `crictl create` from the archive in a new pod `name`; its id, or
   * undefined after a failure. A pod of its own each time: a second restore
   * of the same archive into a pod where the first one ran failed in CRIU
   * (errno 17, EEXIST), into another pod it did not.
   */
  async function createFromArchive(t: Test, name: string): Promise<string | undefined> {
    await vm.run(`mkdir -p /var/log/pods/${name} && cat >/root/ckpt/${name}-pod.json`, { input: JSON.stringify(podConfig(name)) });
    const pod = (await vm.run(`${crictl} runp /root/ckpt/${name}-pod.json`, { timeoutMs: 600_000 })).trim();
    const fromArchive = { metadata: { name: "count", attempt: 0 }, image: { image: "/root/c.tar" }, log_path: "count.log" };
    await vm.run(`cat >/root/ckpt/${name}-ctr.json`, { input: JSON.stringify(fromArchive) });
    const since = Date.now();
    const created = await vm.ssh(`${crictl} create ${pod} /root/ckpt/${name}-ctr.json /root/ckpt/${name}-pod.json`, { timeoutMs: 600_000 });
    if (created.status !== 0) {
      t.fail("crictl create from the archive failed", { output: output(created), cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 20")) });
      return undefined;
    }
    t.comment(`created (the archive's checkpoint staged) in ${seconds(since)}`);
    return created.stdout.trim();
  }

  t.test("a restore without CRIU configuration: FAILED_PRECONDITION and stopped where CRIU takes the checkpointed container's cgroup (runc 1.1), in its own cgroup where runc gives CRIU one (1.2 on)", async (t) => {
    if ((await vm.ssh("test -f /root/c.tar")).status !== 0) {
      t.fail("no archive: the checkpoint failed");
      return;
    }
    const runc = await shimRuncVersion(vm);
    t.comment(`the runc containerd's shim runs: ${runc.join(".")}`);
    const id = await createFromArchive(t, "misplaced");
    if (!id) return;
    const started = await vm.ssh(`${crictl} start ${id}`, { timeoutMs: 600_000 });
    if (runc[0] === 1 && runc[1]! < 2) {
      // runc 1.1 gives CRIU no cgroup root on cgroup v2: CRIU restores into the cgroup its images name.
      t.not(started.status, 0, "the start fails");
      t.match(output(started), /FailedPrecondition.*CRIU restored its processes into the cgroup \S*docker-[0-9a-f]{64}\.scope.*manage-cgroups/s, "naming the cgroup and the remedy", { output: output(started) });
      t.equal(await state(vm, id), "CONTAINER_EXITED", "the restored container was stopped");
    } else {
      // runc 1.2 on hands CRIU the new container's cgroup: the restore lands where it belongs.
      t.equal(started.status, 0, "the start (the restore) succeeds", { output: output(started) });
      t.equal(await state(vm, id), "CONTAINER_RUNNING", "the restored container runs");
      const pid = (await vm.run(`docker inspect --format '{{.State.Pid}}' ${id}`)).trim();
      t.match(await vm.run(`cat /proc/${pid}/cgroup`), new RegExp(`^0::/\\S*docker-${id}[0-9a-f]*\\.scope$`, "m"), "its processes are in its own cgroup");
      await vm.ssh(`${crictl} stop ${id}; ${crictl} rm ${id}`, { timeoutMs: 300_000 });
    }
    t.equal(await state(vm, counter!.container), "CONTAINER_RUNNING", "the checkpointed container, whose cgroup it was, runs on");
  });

  t.test("crictl create from the archive: the counter comes back in a new pod with its memory and its files", async (t) => {
    if ((await vm.ssh("test -f /root/c.tar")).status !== 0) {
      t.fail("no archive: the checkpoint failed");
      return;
    }
    await configureCriu(vm);
    const id = await createFromArchive(t, "restored");
    if (!id) return;
    const since = Date.now();
    const started = await vm.ssh(`${crictl} start ${id}`, { timeoutMs: 600_000 });
    if (started.status !== 0) {
      t.fail("crictl start (the restore) failed", { output: output(started), cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 20")) });
      return;
    }
    t.comment(`restored in ${seconds(since)}`);
    t.equal(await state(vm, id), "CONTAINER_RUNNING", "the restored container runs");
    const pid = (await vm.run(`docker inspect --format '{{.State.Pid}}' ${id}`)).trim();
    t.match(await vm.run(`cat /proc/${pid}/cgroup`), new RegExp(`^0::/\\S*docker-${id}[0-9a-f]*\\.scope$`, "m"), "its processes are in its own cgroup");
    const first = await waitFor(async () => {
      const r = await vm.ssh(`${crictl} logs ${id} 2>/dev/null | head -n 1`, { timeoutMs: 180_000 });
      return Number(r.stdout.trim()) || undefined;
    }, 300_000);
    // A fresh start would count from 1; the restored shell goes on from the number in its memory.
    t.ok(first !== undefined && first > beforeCheckpoint && first <= atCheckpoint + 1, `it counts on from its checkpoint: first line ${first}, the dump was taken between ${beforeCheckpoint} and ${atCheckpoint}`);
    const counted = await waitFor(async () => ((await lastCount(vm, id)) > (first ?? 0) + 2 ? true : undefined), 300_000);
    t.ok(counted, "and keeps counting");
    t.equal((await vm.run(`${crictl} exec ${id} cat /etc/cridock-marker`, { timeoutMs: 300_000 })).trim(), "checkpointed", "the file it added is there (rootfs-diff.tar)");
    t.equal((await vm.ssh(`${crictl} exec ${id} cat /etc/group`, { timeoutMs: 300_000 })).status === 0, false, "the file it deleted is not (deleted.files)");
    const status = JSON.parse(await vm.run(`${crictl} inspect ${id}`, { timeoutMs: 180_000 })) as { status: { image: { image: string } } };
    t.equal(status.status.image.image, BUSYBOX, "its image is the checkpointed container's");
    t.equal(await state(vm, counter!.container), "CONTAINER_RUNNING", "the checkpointed container runs on beside it");
  });

  t.test("crictl create from a missing or a broken archive: NOT_FOUND, INVALID_ARGUMENT; nothing created", async (t) => {
    const pod = (await vm.run(`${crictl} pods --name ckpt -q`)).trim().split("\n")[0]!;
    const before = (await vm.run(`${crictl} ps -a -q | wc -l`)).trim();
    for (const [image, code, reason] of [
      ["/root/missing.tar", "NotFound", /does not exist/],
      ["/etc/hostname", "InvalidArgument", /not a usable checkpoint archive/],
    ] as const) {
      await vm.run(`cat >/root/ckpt/bad-ctr.json`, { input: JSON.stringify({ metadata: { name: "bad", attempt: 0 }, image: { image }, log_path: "bad.log" }) });
      const r = await vm.ssh(`${crictl} create ${pod} /root/ckpt/bad-ctr.json /root/ckpt/ckpt-pod.json`, { timeoutMs: 300_000 });
      t.not(r.status, 0, image);
      t.match(output(r), new RegExp(`${code}.*${reason.source}`, "s"), `${image}: ${code}`, { output: output(r) });
    }
    t.equal((await vm.run(`${crictl} ps -a -q | wc -l`)).trim(), before, "no container left");
  });

  t.test("a stopped container: FAILED_PRECONDITION, nothing written", async (t) => {
    if (!counter) {
      t.fail("no counter ran");
      return;
    }
    await vm.run(`${crictl} stop --timeout 0 ${counter.container}`, { timeoutMs: 300_000 });
    const r = await vm.ssh(`${crictl} checkpoint --export=/root/stopped.tar ${counter.container}`, { timeoutMs: 300_000 });
    t.not(r.status, 0);
    t.match(output(r), /FailedPrecondition.*only a running container can be checkpointed/s, "code and reason", { output: output(r) });
    t.equal((await vm.ssh("test -e /root/stopped.tar")).status, 1, "no archive");
  });

  t.test("a pod on the host's network: checkpointed, or refused naming it", async (t) => {
    const host = await runCounter(vm, "hostnet", true);
    const r = await vm.ssh(`${crictl} checkpoint --export=/root/hostnet.tar ${host.container}`, { timeoutMs: 1_200_000 });
    if (r.status === 0) {
      t.comment("CRIU checkpointed the host-network container");
      t.match(await vm.run("tar -tf /root/hostnet.tar"), /^config\.dump$/m);
    } else {
      t.comment(`refused: ${output(r)}`);
      t.match(output(r), /FailedPrecondition.*host's network namespace/s, "FAILED_PRECONDITION naming the host network", { output: output(r) });
      t.equal((await vm.ssh("test -e /root/hostnet.tar")).status, 1, "no archive");
    }
    t.equal(await state(vm, host.container), "CONTAINER_RUNNING", "the container runs on either way");
  });

  /** The running container named `name` of the static pod `pod` (kubelet suffixes the node's name), or undefined. */
  async function staticPodContainer(pod: string, name: string): Promise<string | undefined> {
    const sandbox = (await vm.ssh(`${crictl} pods -q --state ready --name '^${pod}-${NODE_NAME}$'`, { timeoutMs: 180_000 })).stdout.trim().split("\n")[0];
    if (!sandbox) return undefined;
    return (await vm.ssh(`${crictl} ps -q --state running --name '^${name}$' --pod ${sandbox}`, { timeoutMs: 180_000 })).stdout.trim().split("\n")[0] || undefined;
  }

  // Last: kubelet stops the pods it does not know of, the crictl pods above among them.
  t.test("kubelet restores from a checkpoint image: a static pod naming it runs the counter on from its checkpoint", { skip: existsSync(KUBELET) ? false : `${KUBELET} is missing (scripts/env/install-kubelet.sh builds it)` }, async (t) => {
    await vm.copy(KUBELET, "/usr/local/bin/kubelet", 900_000);
    await configureCriu(vm);
    const staticPod = (name: string, image: string, command?: string[]) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default" },
      spec: { terminationGracePeriodSeconds: 5, containers: [{ name: "count", image, imagePullPolicy: "Never", ...(command ? { command } : {}) }] },
    });
    await vm.run(`mkdir -p ${MANIFESTS} && cat >${MANIFESTS}/source.json`, { input: JSON.stringify(staticPod("source", BUSYBOX, ["sh", "-c", COUNTER])) });
    await startKubelet(vm, kubeletConfig());
    t.teardown(() => vm.ssh(`systemctl stop kubelet; rm -f ${MANIFESTS}/*.json /root/k.tar`, { timeoutMs: 300_000 }));
    let since = Date.now();
    const source = await waitFor(async () => {
      const id = await staticPodContainer("source", "count");
      return id && (await lastCount(vm, id)) >= 3 ? id : undefined;
    }, 900_000);
    if (!source) {
      t.fail("kubelet did not run the source pod's counter", { kubelet: output(await vm.ssh("journalctl -u kubelet --no-pager -o cat | tail -n 30")) });
      return;
    }
    t.comment(`kubelet ran the counter in ${seconds(since)}`);
    const before = await lastCount(vm, source);
    // What kubelet's POST /checkpoint/{namespace}/{pod}/{container} asks cridock for.
    const dumped = await vm.ssh(`${crictl} checkpoint --export=/root/k.tar ${source}`, { timeoutMs: 1_200_000 });
    if (dumped.status !== 0) {
      t.fail("crictl checkpoint of kubelet's container failed", { output: output(dumped) });
      return;
    }
    const after = await lastCount(vm, source);
    await vm.run(loadCheckpointImage("/root/k.tar", CHECKPOINT_IMAGE), { timeoutMs: 600_000 });
    t.equal((await vm.run(`docker image inspect --format '{{json .Config.Cmd}} {{len .RootFS.Layers}}' ${CHECKPOINT_IMAGE}`)).trim(), "null 1", "the checkpoint image: nothing to run, one layer");

    since = Date.now();
    await vm.run(`cat >${MANIFESTS}/restored.json`, { input: JSON.stringify(staticPod("restored", CHECKPOINT_IMAGE)) });
    const restored = await waitFor(() => staticPodContainer("restored", "count"), 600_000);
    if (!restored) {
      t.fail("kubelet's pod of the checkpoint image did not run", {
        kubelet: output(await vm.ssh("journalctl -u kubelet --no-pager -o cat | grep -i -e error -e restore | tail -n 20")),
        cridock: output(await vm.ssh("journalctl -u cridock --no-pager -o cat | tail -n 20")),
      });
      return;
    }
    t.comment(`kubelet's pod of the checkpoint image ran in ${seconds(since)}`);
    const first = await waitFor(async () => {
      const r = await vm.ssh(`${crictl} logs ${restored} 2>/dev/null | head -n 1`, { timeoutMs: 180_000 });
      return Number(r.stdout.trim()) || undefined;
    }, 300_000);
    t.ok(first !== undefined && first > before && first <= after + 1, `it counts on from its checkpoint: first line ${first}, the dump was taken between ${before} and ${after}`);
    const pid = (await vm.run(`docker inspect --format '{{.State.Pid}}' ${restored}`)).trim();
    t.match(await vm.run(`cat /proc/${pid}/cgroup`), new RegExp(`^0::/kubepods\\.slice/\\S*docker-${restored}[0-9a-f]*\\.scope$`, "m"), "in its own cgroup, under kubelet's pod slice");
    t.ok(await waitFor(async () => ((await lastCount(vm, restored)) > (first ?? 0) + 3 ? true : undefined), 300_000), "and keeps counting");
    const pods = JSON.parse(await vm.run(`busybox wget -q -O - http://127.0.0.1:${READ_ONLY_PORT}/pods`)) as {
      items: { metadata: { name: string }; status: { containerStatuses?: { name: string; restartCount: number; state: { running?: unknown } }[] } }[];
    };
    const status = pods.items.find((p) => p.metadata.name === `restored-${NODE_NAME}`)?.status.containerStatuses?.[0];
    t.match(status, { name: "count", restartCount: 0, state: { running: {} } }, "kubelet reports it running, never restarted", { pods: pods.items.map((p) => p.metadata.name) });
    t.equal(await state(vm, source), "CONTAINER_RUNNING", "the checkpointed container runs on beside it");
  });
}
