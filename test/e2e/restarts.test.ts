// Restarts and housekeeping through a real kubelet: kubelet and cridock
// restart under running pods without restarting a container or losing or
// doubling a log line; containerLogMaxSize rotation through
// ReopenContainerLog; image garbage collection through RemoveImage.
import t from "tap";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { KubeletEnv, sleep } from "./harness/kubelet-env.ts";
import { BUSYBOX_IMAGE, PAUSE_IMAGE, REGISTRY } from "../helpers/env.ts";
import { value } from "../helpers/metrics-scrape.ts";

const env = await KubeletEnv.start();
t.teardown(() => env.destroy());

const GC_IMAGE = `${REGISTRY}/cridock-test/image-list-1:1`;

/** Docker's start time of every container of the pods: a restart changes it. */
function startTimes(): Map<string, string> {
  const ids = env.docker("ps", "-q", "--no-trunc", "--filter", "label=io.kubernetes.docker.type").split("\n").filter(Boolean);
  const out = new Map<string, string>();
  for (const c of JSON.parse(env.docker("inspect", ...ids)) as { Id: string; State: { StartedAt: string } }[]) out.set(c.Id, c.State.StartedAt);
  return out;
}

/** The CRI log lines of one container, rotated files first (oldest to newest), as kubelet laid them out. */
async function logLines(pod: string, container: string): Promise<string[]> {
  const podDir = (await readdir(env.podLogs)).find((d) => d.startsWith(`default_${env.podName(pod)}_`));
  if (!podDir) return [];
  const dir = join(env.podLogs, podDir, container);
  const files = (await readdir(dir)).sort((a, b) => (a === "0.log" ? 1 : b === "0.log" ? -1 : a.localeCompare(b)));
  const lines: string[] = [];
  for (const f of files.filter((name) => !name.endsWith(".tmp"))) {
    const raw = await readFile(join(dir, f));
    const text = (f.endsWith(".gz") ? gunzipSync(raw) : raw).toString();
    lines.push(...text.split("\n").filter(Boolean));
  }
  return lines;
}

async function logFiles(pod: string, container: string): Promise<string[]> {
  const podDir = (await readdir(env.podLogs)).find((d) => d.startsWith(`default_${env.podName(pod)}_`));
  return podDir ? readdir(join(env.podLogs, podDir, container)) : [];
}

await env.writePod({
  metadata: { name: "counter", namespace: "default" },
  spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sh", "-c", "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.1; done"] }] },
});
await env.waitRunning("counter");

t.test("kubelet and cridock restarts restart no container and lose or double no log line", async (t) => {
  const before = startTimes();
  t.ok(before.size >= 2, "the pod's sandbox and container run");
  await env.restartKubelet();
  await sleep(5000);
  t.same(startTimes(), before, "after a kubelet restart every container still runs from its first start");
  await env.restartCridock();
  await sleep(5000);
  const pod = await env.waitRunning("counter");
  t.equal(pod.status.containerStatuses?.[0]?.restartCount, 0, "kubelet saw no restart");
  t.same(startTimes(), before, "after a cridock restart every container still runs from its first start");

  const numbers = (await logLines("counter", "app")).map((l) => {
    const m = / stdout F line-(\d+)$/.exec(l);
    if (!m) throw new Error(`not a CRI log line of the counter: ${l}`);
    return Number(m[1]);
  });
  t.ok(numbers.length > 80, `${numbers.length} lines`);
  const wrong = numbers.flatMap((n, i) => (n === i ? [] : [`#${i}: line-${n}`]));
  t.same(wrong.slice(0, 5), [], "line-0, line-1, ... each exactly once, in order, across both restarts");
});

t.test("containerLogMaxSize: kubelet rotates through ReopenContainerLog and logging goes on", async (t) => {
  await env.writePod({
    metadata: { name: "chatty", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sh", "-c", "i=0; while true; do printf 'chatty-%08d %0400d\\n' $i 0; i=$((i+1)); sleep 0.005; done"] }],
    },
  });
  await env.waitRunning("chatty");
  const deadline = Date.now() + 60_000;
  let files = await logFiles("chatty", "app");
  while (files.filter((f) => f !== "0.log").length < 2 && Date.now() < deadline) {
    await sleep(1000);
    files = await logFiles("chatty", "app");
  }
  const rotated = files.filter((f) => f !== "0.log");
  t.ok(rotated.length >= 2, `rotated files: ${rotated.join(", ")}`);
  t.ok(files.filter((f) => !f.endsWith(".tmp")).length <= 3, `at most containerLogMaxFiles (3) files: ${files.join(", ")}`);
  const current = (await logLines("chatty", "app")).slice(-5);
  await sleep(1500);
  const later = (await logLines("chatty", "app")).slice(-1)[0];
  t.not(later, current[current.length - 1], "the reopened file keeps receiving output");
  const seq = (await logLines("chatty", "app")).map((l) => Number(/chatty-(\d+)/.exec(l)?.[1]));
  const gaps = seq.slice(1).filter((n, i) => n !== seq[i]! + 1);
  t.same(gaps, [], "no line lost or doubled across the files kubelet kept");
  await env.deletePod("chatty");
});

// kubelet's periodic image GC pass runs once at start, before cAdvisor has
// any filesystem data (it fails with "invalid capacity 0 on image
// filesystem"), and then every 5 minutes. The eviction manager drives the same
// image GC manager (DeleteUnusedImages, then RemoveImage per unused image)
// every 10 s when the image filesystem is under pressure: a threshold above
// this disk's free share puts it there at once. Static pods are critical, so
// the eviction manager never evicts the running pod. The pause image is
// reported pinned, so it stays too.
t.test("image garbage collection removes unused images through RemoveImage", async (t) => {
  await env.cridock.client.imageCall("PullImage", { image: { image: GC_IMAGE } });
  const present = () => env.docker("images", "--format", "{{.Repository}}:{{.Tag}}").split("\n");
  t.ok(present().includes(GC_IMAGE), "an image no pod uses is present");
  const removeImageCalls = async () => value(await env.metrics(), 'cridock_cri_requests_total{service="ImageService",method="RemoveImage",code="OK"}');
  const removedBefore = await removeImageCalls();
  await env.restartKubelet({
    evictionHard: { "memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "99%", "nodefs.inodesFree": "1%" },
    // 1s, not 0s: kubelet's config defaulting turns a zero age into 2 minutes.
    imageMinimumGCAge: "1s",
  });
  const deadline = Date.now() + 90_000;
  while (present().includes(GC_IMAGE) && Date.now() < deadline) await sleep(1000);
  t.notOk(present().includes(GC_IMAGE), "kubelet removed it");
  t.ok((await removeImageCalls()) > removedBefore, "through cridock's RemoveImage");
  t.ok(present().includes(BUSYBOX_IMAGE), "the image of the running pod stays");
  t.ok(present().includes(PAUSE_IMAGE), "the pinned pause image stays");
  await env.restartKubelet();
  const pod = await env.waitRunning("counter");
  t.equal(pod.status.containerStatuses?.[0]?.restartCount, 0, "the running pod was not disturbed");
});
