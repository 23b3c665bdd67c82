/**
 * Switching a node from cri-dockerd to cridock: pods cri-dockerd left
 * running (fixtures in cri-dockerd's layout, cri-dockerd-fixture.ts) are
 * listed READY with their IPs, can be exec'ed into and logged from, their
 * CRI log is taken over without losing or repeating a line (also across a
 * cridock restart), and Stop/Remove free everything: containers, the netns
 * handle, the host-local IP, the CNI cache entry. A damaged cri-dockerd
 * checkpoint leaves its pod alone without stopping cridock.
 */
import t from "tap";
import type { Test } from "tap";
import { lstat, mkdtemp, readdir, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DockerClient } from "../../../src/docker/client.ts";
import { silentLogger } from "../../../src/log.ts";
import { listNetnsHandles, unpinNetns } from "../../../src/network/netns.ts";
import { startCridockProcess, type CridockProcess } from "../../helpers/cridock-process.ts";
import { cridockTestFlags, makeCniConfDir, PAUSE_IMAGE } from "../../helpers/env.ts";
import { makeCriDockerdPod, type FixturePod } from "./cri-dockerd-fixture.ts";

const scratch = await mkdtemp(join(tmpdir(), "cridock-migration-"));
const docker = new DockerClient({ endpoint: process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock", requestTimeoutMs: 60_000, logger: silentLogger });
const cni = await makeCniConfDir();
const criDockerdRoot = join(scratch, "cri-dockerd");
const cniCacheDir = join(scratch, "cni-cache");
const rootDirectory = join(scratch, "cridock");
const socketPath = join(scratch, "cri.sock");
const logRoot = join(scratch, "pods");
const created: string[] = [];

t.teardown(async () => {
  for (const id of created) await docker.removeContainer(id, { force: true }).catch(() => undefined);
  // A failed run may leave handles mounted; rm would stop at them.
  for (const handle of await listNetnsHandles(join(rootDirectory, "netns"))) await unpinNetns(handle).catch(() => undefined);
  await docker.close();
  await cni.cleanup();
  await rm(scratch, { recursive: true, force: true });
});

// A numbered line every 20 ms: gaps or repeats in the CRI file show.
const COUNTER = "trap 'exit 0' TERM; i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.02; done";
const fixture = (name: string, libcniCache: boolean): Promise<FixturePod> =>
  makeCriDockerdPod({ docker, cni, cniCacheDir, criDockerdRoot, logRoot, name, libcniCache, command: COUNTER }).then((p) => {
    created.push(p.sandboxId, p.containerId);
    return p;
  });
const withCache = await fixture(`mig-a-${process.pid}`, true);
const withoutCache = await fixture(`mig-b-${process.pid}`, false);

// A third pause container whose cri-dockerd checkpoint is damaged.
const damaged = await docker.createContainer(`k8s_POD_mig-c-${process.pid}_cridock-migration_uid-c-${process.pid}_0`, {
  Image: PAUSE_IMAGE,
  Labels: { "io.kubernetes.docker.type": "podsandbox", "io.kubernetes.container.name": "POD" },
  HostConfig: { NetworkMode: "none" },
} as never);
created.push(damaged.Id);
await mkdir(join(criDockerdRoot, "sandbox"), { recursive: true });
await writeFile(join(criDockerdRoot, "sandbox", damaged.Id), '{"version":"v1","name":');
await new Promise((r) => setTimeout(r, 500)); // let the workloads log a few lines under cri-dockerd's symlink

const flags = [...cridockTestFlags(cni), `--cri-dockerd-root-directory=${criDockerdRoot}`, `--cni-cache-dir=${cniCacheDir}`];
let cridock: CridockProcess = await startCridockProcess({ flags, socketPath, rootDirectory });
t.teardown(() => cridock.stop());

/** The numbered lines of a CRI log file, checked for CRI format. */
async function numbers(path: string): Promise<number[]> {
  const text = await readFile(path, "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const m = /^\S+ stdout F line-(\d+)$/.exec(line);
      if (!m) throw new Error(`not a CRI record of the counter: ${JSON.stringify(line)}`);
      return Number(m[1]);
    });
}

async function waitNumbers(path: string, atLeast: number): Promise<number[]> {
  for (let i = 0; ; i++) {
    const n = await numbers(path).catch(() => []);
    if (n.length >= atLeast || i > 300) return n;
    await new Promise((r) => setTimeout(r, 100));
  }
}

function consecutive(t: Test, n: number[], what: string): void {
  const bad = n.findIndex((v, i) => v !== i);
  t.equal(bad, -1, `${what}: ${n.length} lines, line-0 onwards, no gap and no repeat${bad >= 0 ? ` (first wrong at ${bad}: ${n[bad]})` : ""}`);
}

t.test("adopted pods are READY with their IPs and their containers running", async (t) => {
  const listed = (await cridock.client.call("ListPodSandbox", {})).items;
  for (const pod of [withCache, withoutCache]) {
    const item = listed.find((s: { id: string }) => s.id === pod.sandboxId);
    t.equal(item?.state, 0, `${pod.name} READY`);
    t.same(item?.labels, { app: "legacy", "io.kubernetes.pod.name": pod.name, "io.kubernetes.pod.namespace": pod.namespace, "io.kubernetes.pod.uid": pod.uid });
    const st = await cridock.client.call("PodSandboxStatus", { podSandboxId: pod.sandboxId, verbose: true });
    t.equal(st.status.network.ip, pod.ip, `${pod.name} has the IP CNI gave it under cri-dockerd`);
    const info = JSON.parse(st.info.info);
    t.equal(info.adoptedFrom, "cri-dockerd");
    t.match(info.netnsPath, new RegExp(`/netns/${pod.sandboxId}$`), "netns pinned under cridock's root");
    const c = (await cridock.client.call("ContainerStatus", { containerId: pod.containerId })).status;
    t.equal(c.state, 1, "container RUNNING");
    t.equal(c.logPath, pod.logPath);
  }
  const allocated = await readdir(join(cni.ipamDataDir, cni.networkName));
  t.ok(allocated.includes(withCache.ip) && allocated.includes(withoutCache.ip), "host-local holds both IPs (so the check after removal means something)");
  const bad = listed.find((s: { id: string }) => s.id === damaged.Id);
  t.ok(bad, "the pod with a damaged checkpoint is still listed (from Docker)");
  const badInfo = JSON.parse((await cridock.client.call("PodSandboxStatus", { podSandboxId: damaged.Id, verbose: true })).info.info);
  t.equal(badInfo.adoptedFrom, null, "and was not taken over");
  t.match(cridock.logs(), /cri-dockerd's checkpoint of this pod is unusable/);
});

t.test("exec works in an adopted container", async (t) => {
  const r = await cridock.client.call("ExecSync", { containerId: withCache.containerId, cmd: ["sh", "-c", "echo hello; ip -4 addr show eth0 | grep -o 'inet [0-9.]*'"], timeout: 10n });
  t.equal(r.exitCode, 0);
  t.equal(Buffer.from(r.stdout).toString(), `hello\ninet ${withCache.ip}\n`, "output, from inside the pod's network");
});

t.test("the CRI log is taken over: a regular file, every line once, still growing", async (t) => {
  for (const pod of [withCache, withoutCache]) {
    t.notOk((await lstat(pod.logPath)).isSymbolicLink(), "the symlink to Docker's json log is replaced by a file");
    const first = await waitNumbers(pod.logPath, 30);
    consecutive(t, first, `${pod.name} right after the switch`);
    const later = await waitNumbers(pod.logPath, first.length + 20);
    t.ok(later.length > first.length, "new lines keep arriving");
    consecutive(t, later, pod.name);
  }
});

t.test("a cridock restart neither adopts twice nor repeats a line", async (t) => {
  await cridock.stop();
  await new Promise((r) => setTimeout(r, 300)); // lines logged while cridock is down
  cridock = await startCridockProcess({ flags, socketPath, rootDirectory });
  t.notMatch(cridock.logs(), /took a pod over from cri-dockerd/, "nothing taken over again");
  const n = await waitNumbers(withCache.logPath, (await numbers(withCache.logPath)).length + 20);
  consecutive(t, n, "after the restart");
  const st = await cridock.client.call("PodSandboxStatus", { podSandboxId: withCache.sandboxId });
  t.equal(st.status.state, 0);
  t.equal(st.status.network.ip, withCache.ip);
});

t.test("stop and remove leave nothing behind", async (t) => {
  for (const pod of [withCache, withoutCache]) {
    await cridock.client.call("StopPodSandbox", { podSandboxId: pod.sandboxId });
    await cridock.client.call("RemovePodSandbox", { podSandboxId: pod.sandboxId });
    await t.rejects(docker.inspectContainer(pod.containerId), /no such container/i, `${pod.name}: container removed`);
    await t.rejects(docker.inspectContainer(pod.sandboxId), /no such container/i, `${pod.name}: pause container removed`);
  }
  const ipam = await readdir(join(cni.ipamDataDir, cni.networkName)).catch(() => []);
  const allocated = ipam.filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f));
  t.notOk(allocated.includes(withCache.ip) || allocated.includes(withoutCache.ip), `host-local freed both IPs (left: ${allocated.join(", ") || "none"})`);
  const cache = await readdir(join(cniCacheDir, "results")).catch(() => []);
  t.same(cache.filter((f) => f.includes(withCache.sandboxId) || f.includes(withoutCache.sandboxId)), [], "CNI cache entries removed");
  t.same(await readdir(join(rootDirectory, "netns")).catch(() => []), [], "netns handles released");
  t.same((await readdir(join(rootDirectory, "sandbox"))).filter((f) => !f.startsWith(".")), [], "cridock checkpoints removed");
  await cridock.client.call("RemovePodSandbox", { podSandboxId: damaged.Id });
});
