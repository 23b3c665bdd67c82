/**
 * Benchmark: a burst of static pods through a real kubelet and cridock (the
 * e2e environment: private dockerd, CNI, standalone kubelet), with kubelet's
 * generic PLEG and with evented PLEG (GetContainerEvents).
 *
 * For each mode it writes N manifests at once and reports
 * - per-pod start latency, manifest write → all containers running and
 *   ready on kubelet's /pods (p50/p90/p99). kubelet's own
 *   kubelet_pod_start_sli_duration_seconds cannot serve here: kubelet feeds
 *   it from the API server's watch and leaves static pods out;
 * - cridock's CPU time (user+system) from the write until all pods ran;
 * - where the time went, from cridock's /metrics: each CRI method's calls,
 *   summed and mean latency; the step timer's steps of RunPodSandbox,
 *   CreateContainer and StartContainer; Docker endpoints; CNI ADD;
 * - the slowest Version and Status answer while the pods are deleted, the
 *   runtime's CPU and minor page faults meanwhile (a fork of a Node process
 *   write-protects all its memory, and each page written next faults).
 *
 * --compare runs the same bursts, alternating, with another tree's cridock
 * (e.g. a checkout from before a change): latency and CPU side by side. Both
 * arms then run without metrics, since older trees may not serve them, and
 * the breakdown comes from one more burst of this tree, not counted;
 * --compare-metrics has both serve them instead (the event-loop delay of
 * each, alike), when the other tree has --metrics-bind-addr.
 * --compare-cri-dockerd does the same with a cri-dockerd binary (built
 * outside the repository) behind the same kubelet, and prints the ratios
 * of each round. Every arm reports the runtime's CPU over the burst and
 * over the deletion, and its RSS idle (images pulled) and after the burst.
 * cri-dockerd refuses engines older than API 1.42 (Debian's 20.10 is 1.41):
 * point CRIDOCK_TEST_DOCKERD_BIN at an Engine 29 build for that comparison.
 * Each cridock arm also prints its CPU over the burst and over the deletion
 * by thread (lib/proc-usage.ts: the main thread, V8's four platform
 * workers, the other threads, the threads that ended meanwhile) with its
 * live helper processes apart.
 * Each cridock arm also prints its resident memory split (anonymous and
 * file-backed, from smaps_rollup) idle, after the burst and after the
 * deletion.
 * --compare-containerd <dir> adds containerd 2.x's own CRI behind the same
 * kubelet (dir: containerd and its runc shim, scripts/bench/build-containerd.sh):
 * the floor a node without Docker pays. It is runtime and engine in one
 * process, so its CPU is the runtime's and its engine's is 0; the Docker
 * arms' shims (Docker's containerd) are not counted either. Its runc is the
 * one beside CRIDOCK_TEST_DOCKERD_BIN when that is set.
 * --cpu-prof <dir> writes a V8 CPU profile of each cridock there (written
 * when it stops) and prints the deletion's span on the profile's clock
 * (CLOCK_MONOTONIC, µs, printed for every run), so a profile's long tasks
 * can be placed in it.
 * --cridock-env KEY=VALUE (repeatable) runs this tree's cridock with that
 * in its environment (not the compared arms'): a launcher's setting such as
 * MALLOC_ARENA_MAX, side by side with the same tree without it via --compare.
 * --steady <s> holds the N pods that long once all run, then reports for
 * each arm: the runtime's CPU (its process and direct children) and its
 * engine's (dockerd) over the window, nothing but kubelet calling either;
 * kubelet's PLEG relist mean over it (kubelet_pleg_relist_duration_seconds);
 * then, after the window so that they stay out of its CPU, the medians of
 * 5 Summary API GETs (/stats/summary) and of 5 ListContainers and
 * ListPodSandbox calls. With --cpu-prof the window's span on the profile's
 * clock is printed, so the profile can be cut to it.
 * --settle <s> reads each cridock's resident split once more that many
 * seconds after the deletion (what V8 gives back once the node is quiet).
 * --heap-snapshots <dir> has each cridock write a heap snapshot there when
 * idle, after the burst and after the deletion (SIGUSR2, node's
 * --heapsnapshot-signal); each stalls cridock a second or more, so the
 * timings of such a run mean nothing.
 *
 * --compare-executable [name=]<path> (repeatable) adds an arm that runs a
 * self-contained executable of cridock (scripts/build/binary.ts; another
 * tree's, e.g. before and after a change of its Node, or one built with
 * other start options, binary.ts --v8-option), named `name` in the tables
 * when given, and --compare-deno
 * one that runs this tree's cridock on Deno (node_modules/.bin/deno, with
 * cridock-process.ts's DENO_V8_FLAGS). --no-tree leaves out this tree's
 * own arm (the sources or bundle on the Node running the benchmark), for a
 * run of executables, Deno and cri-dockerd alone; the breakdown's extra
 * burst is then skipped too. Each cridock arm is set against each
 * non-cridock arm in the ratio tables.
 *
 * The recorded run (CRIDOCK_RECORD_RESULTS, lib/results.ts) is one table
 * (lib/pods-table.ts): a row per figure, a column per arm and a ratio
 * column for each cridock arm over each other runtime (in a run of cridock
 * arms alone, over the first arm). Its note says what ran beside the run
 * (the load average at each arm's start and end, and any VM, a
 * qemu-system process, seen meanwhile) and adds --note's text; its command
 * names paths outside this tree by their last part only.
 *
 *   npx tsx scripts/bench/kubelet-pods.ts [--pods 30] [--modes generic,evented] [--rounds 1] [--steady <seconds>]
 *                                         [--compare <other tree's bin/cridock.js> [--compare-metrics]] [--compare-cri-dockerd <binary>]
 *                                         [--compare-executable [name=]<path>]... [--compare-deno] [--no-tree]
 *                                         [--compare-containerd <dir>]
 *                                         [--cpu-prof <dir>] [--heap-snapshots <dir>] [--settle <seconds>] [--cridock-env KEY=VALUE]
 *                                         [--note <text>]
 *
 * Needs what the e2e suite needs (root, scripts/env/setup.sh, scripts/env/install-kubelet.sh).
 * The engine is `dockerd` on PATH unless CRIDOCK_TEST_DOCKERD_BIN names
 * another: the cost targets are set on Engine 29, the dockerd that
 * scripts/env/install-docker-engine.sh builds (cri-dockerd refuses Debian
 * 12's 20.10, API 1.41). Each arm's program is dropped from the page cache
 * before it starts (evictFromPageCache).
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { KubeletEnv, sleep } from "../../test/e2e/harness/kubelet-env.ts";
import { BUSYBOX_IMAGE, PAUSE_IMAGE } from "../../test/helpers/env.ts";
import type { Samples } from "../../test/helpers/metrics-scrape.ts";
import { cpuProfileFlags, monotonicMicros } from "./lib/cpu-profile.ts";
import { parseExposition } from "../../test/helpers/metrics-scrape.ts";
import { formatThreadCpu, residentSplit, rssMb, threadCpuDelta, threadCpuSample, treeCpuSeconds, type ResidentSplit } from "./lib/proc-usage.ts";
import { commandLine, recordResult } from "./lib/results.ts";
import { podsTable, type ArmFigures } from "./lib/pods-table.ts";
import { REPO_ROOT } from "../../test/helpers/cridock-process.ts";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "30" },
    modes: { type: "string", default: "generic,evented" },
    rounds: { type: "string", default: "1" },
    compare: { type: "string" },
    "compare-cri-dockerd": { type: "string" },
    "compare-containerd": { type: "string" },
    "compare-metrics": { type: "boolean", default: false },
    "compare-executable": { type: "string", multiple: true, default: [] },
    "compare-deno": { type: "boolean", default: false },
    "no-tree": { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
    "heap-snapshots": { type: "string" },
    settle: { type: "string", default: "0" },
    steady: { type: "string", default: "0" },
    "cridock-env": { type: "string", multiple: true, default: [] },
    note: { type: "string" },
  },
});
const PODS = Number(values.pods);
const ROUNDS = Number(values.rounds);
const CLOCK_TICKS = 100;
const CPU_PROF = values["cpu-prof"];
const HEAP_SNAPSHOTS = values["heap-snapshots"];
const SETTLE_S = Number(values.settle);
const STEADY_S = Number(values.steady);
const CRIDOCK_ENV = Object.fromEntries(
  values["cridock-env"]!.map((pair) => {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new Error(`--cridock-env wants KEY=VALUE, not ${JSON.stringify(pair)}`);
    return [pair.slice(0, eq), pair.slice(eq + 1)];
  }),
);
/** node's own flags for each cridock arm. */
const cridockNodeFlags = [
  ...(cpuProfileFlags(CPU_PROF) ?? []),
  ...(HEAP_SNAPSHOTS ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${HEAP_SNAPSHOTS}`] : []),
];

function formatSplit(split: ResidentSplit): string {
  return `RSS ${split.rss.toFixed(1)} MB (anonymous ${split.anonymous.toFixed(1)}, file-backed ${split.fileBacked.toFixed(1)}, of it its own executable ${split.ownExecutable.toFixed(1)})`;
}

/** Has node write a heap snapshot (--heapsnapshot-signal) and waits until the file is complete. */
async function heapSnapshot(pid: number, label: string): Promise<void> {
  if (!HEAP_SNAPSHOTS) return;
  const ours = () => readdirSync(HEAP_SNAPSHOTS).filter((f) => f.includes(`.${pid}.`) && f.endsWith(".heapsnapshot"));
  const before = ours().length;
  process.kill(pid, "SIGUSR2");
  const deadline = Date.now() + 120_000;
  // node writes the file as it walks the heap; a size that holds still for a second is done.
  let lastSize = -1;
  while (Date.now() < deadline) {
    await sleep(1000);
    const files = ours();
    if (files.length <= before) continue;
    const newest = files.sort().at(-1)!;
    const size = readFileSync(`${HEAP_SNAPSHOTS}/${newest}`).length;
    if (size > 0 && size === lastSize) {
      console.log(`heap snapshot of ${pid} ${label}: ${HEAP_SNAPSHOTS}/${newest}`);
      return;
    }
    lastSize = size;
  }
  console.log(`heap snapshot of ${pid} ${label}: not written in 120 s`);
}

function statFields(pid: number): string[] {
  return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
}

function cpuSeconds(pid: number): number {
  const fields = statFields(pid);
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/**
 * The process's minor page faults so far (all its threads). Each fork of
 * the runtime (Node's spawn, from any thread) write-protects its private
 * memory, and the next write to each page faults: this counts that tax.
 */
function minorFaults(pid: number): number {
  return Number(statFields(pid)[7]);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** A series key `name{a="x",b="y"}` split into its name and labels. */
function parseSeries(series: string): { name: string; labels: Record<string, string> } {
  const brace = series.indexOf("{");
  const name = brace < 0 ? series : series.slice(0, brace);
  const labels: Record<string, string> = {};
  for (const m of series.slice(brace + 1).matchAll(/(\w+)="([^"]*)"/g)) labels[m[1]!] = m[2]!;
  return { name, labels };
}

interface Row {
  key: string;
  count: number;
  seconds: number;
}

/** Per label key of one histogram: observations and summed seconds between two scrapes. */
function histogramDelta(before: Samples, after: Samples, name: string, keyOf: (labels: Record<string, string>) => string | undefined): Row[] {
  const rows = new Map<string, Row>();
  for (const [series, v] of after) {
    const parsed = parseSeries(series);
    const field = parsed.name === `${name}_count` ? "count" : parsed.name === `${name}_sum` ? "seconds" : undefined;
    if (!field) continue;
    const key = keyOf(parsed.labels);
    if (key === undefined) continue;
    const row = rows.get(key) ?? { key, count: 0, seconds: 0 };
    row[field] += v - (before.get(series) ?? 0);
    rows.set(key, row);
  }
  return [...rows.values()].filter((r) => r.count > 0).sort((a, b) => b.seconds - a.seconds);
}

function printRows(title: string, rows: Row[], limit = 12): void {
  console.log(title);
  console.log(`  ${"".padEnd(52)} ${"calls".padStart(6)} ${"total s".padStart(8)} ${"mean ms".padStart(8)}`);
  for (const r of rows.slice(0, limit)) {
    console.log(`  ${r.key.padEnd(52)} ${String(r.count).padStart(6)} ${r.seconds.toFixed(2).padStart(8)} ${((r.seconds / r.count) * 1000).toFixed(1).padStart(8)}`);
  }
}

function printBreakdown(before: Samples, after: Samples): void {
  printRows(
    "CRI calls during the burst (summed latency; calls overlap):",
    histogramDelta(before, after, "cridock_cri_request_duration_seconds", (l) => l.method),
  );
  printRows(
    "steps of the pod-start operations (mean per operation; step 'total' is the whole call):",
    histogramDelta(before, after, "cridock_operation_step_duration_seconds", (l) =>
      ["RunPodSandbox", "CreateContainer", "StartContainer"].includes(l.operation!) ? `${l.operation} ${l.step}` : undefined,
    ),
    30,
  );
  printRows(
    "Docker requests (until dockerd's answer headers):",
    histogramDelta(before, after, "cridock_docker_request_duration_seconds", (l) => `${l.method} ${l.endpoint}`),
  );
  printRows("CNI:", histogramDelta(before, after, "cridock_cni_operation_duration_seconds", (l) => l.operation));
}

interface Arm {
  name: string;
  entry?: string;
  /** A self-contained executable of cridock run instead of this tree's sources. */
  executable?: string;
  /** This tree's cridock on Deno. */
  deno?: boolean;
  /** A cri-dockerd binary run instead of cridock. */
  criDockerd?: string;
  /** containerd 2.x's own CRI run instead of cridock (no Docker behind it). */
  containerd?: { binDir: string; runcDir?: string };
  /** Serve and read cridock's /metrics (the breakdown). */
  metrics: boolean;
}

/** Whether the arm runs a cridock (this tree or another), not another runtime in its place. */
const isCridock = (arm: Arm): boolean => !arm.criDockerd && !arm.containerd;

/** The N pods held, one round: the table's steady figures less the window's length, which is STEADY_S. */
type SteadyResult = Omit<NonNullable<ArmFigures["steady"]>, "seconds">;

/** kubelet's relist histogram: seconds summed and relists counted so far. */
async function plegRelists(env: KubeletEnv): Promise<{ seconds: number; count: number }> {
  const { status, body } = await env.get("/metrics");
  if (status !== 200) throw new Error(`kubelet's /metrics answered ${status}`);
  const samples = parseExposition(body);
  return { seconds: samples.get("kubelet_pleg_relist_duration_seconds_sum") ?? NaN, count: samples.get("kubelet_pleg_relist_duration_seconds_count") ?? NaN };
}

/** The median time of 5 sequential calls of `call` (ms). */
async function medianMs(call: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
  }
  return percentile(times.sort((a, b) => a - b), 50);
}

async function steadyWindow(env: KubeletEnv, arm: Arm, pid: number): Promise<SteadyResult> {
  // containerd is runtime and engine in one process; the Docker arms' engine is the private dockerd.
  const enginePid = arm.containerd ? undefined : Number((await readFile(env.dockerd.pidFile, "utf8")).trim());
  const engineCpu = async () => (enginePid === undefined ? 0 : treeCpuSeconds(enginePid));
  const relistBefore = await plegRelists(env);
  const scrapeBefore = arm.metrics ? await env.metrics() : undefined;
  const runtimeBefore = await treeCpuSeconds(pid);
  const engineBefore = await engineCpu();
  const from = monotonicMicros();
  await sleep(STEADY_S * 1000);
  const runtimeCpuS = (await treeCpuSeconds(pid)) - runtimeBefore;
  const engineCpuS = (await engineCpu()) - engineBefore;
  const to = monotonicMicros();
  // The pods held a while, nothing starting or stopping: the memory they cost at rest.
  const rssHeldMb = await rssMb(pid);
  const relistAfter = await plegRelists(env);
  if (scrapeBefore) {
    const scrapeAfter = await env.metrics();
    printRows(`CRI calls in the steady window (kubelet's alone):`, histogramDelta(scrapeBefore, scrapeAfter, "cridock_cri_request_duration_seconds", (l) => l.method));
    printRows("Docker requests in the steady window:", histogramDelta(scrapeBefore, scrapeAfter, "cridock_docker_request_duration_seconds", (l) => `${l.method} ${l.endpoint}`));
  }
  const result: SteadyResult = {
    runtimeCpuS,
    engineCpuS,
    plegRelistMs: ((relistAfter.seconds - relistBefore.seconds) / (relistAfter.count - relistBefore.count)) * 1000,
    // NaN where kubelet cannot build the summary for this runtime (its answer is printed): the other figures stand.
    summaryMs: await medianMs(async () => {
      const { status, body } = await env.get("/stats/summary", 60_000);
      if (status !== 200) throw new Error(`kubelet's /stats/summary answered ${status}: ${body.slice(0, 300)}`);
    }).catch((err: unknown) => {
      console.log(`[${arm.name}] ${err instanceof Error ? err.message : String(err)}`);
      return NaN;
    }),
    listContainersMs: await medianMs(() => env.cridock.client.call("ListContainers", {})),
    listSandboxesMs: await medianMs(() => env.cridock.client.call("ListPodSandbox", {})),
    rssHeldMb,
  };
  console.log(
    `[${arm.name}] steady ${STEADY_S} s with ${PODS} pods: runtime CPU ${runtimeCpuS.toFixed(2)} s ` +
      `(${((runtimeCpuS / STEADY_S) * 100).toFixed(1)}% of a core), dockerd ${engineCpuS.toFixed(2)} s; RSS at its end ${rssHeldMb.toFixed(1)} MB; ` +
      `PLEG relist mean ${result.plegRelistMs.toFixed(1)} ms over ${relistAfter.count - relistBefore.count}; ` +
      `then Summary API ${result.summaryMs.toFixed(0)} ms, ListContainers ${result.listContainersMs.toFixed(1)} ms, ` +
      `ListPodSandbox ${result.listSandboxesMs.toFixed(1)} ms (medians of 5)` +
      (CPU_PROF && isCridock(arm) ? `; window on the profile's clock ${from} to ${to} µs` : ""),
  );
  return result;
}

interface BurstResult {
  latencies: number[];
  allRunningS: number;
  cpuS: number;
  /** Runtime CPU from the first deletion until every container stopped. */
  deleteCpuS: number;
  /** The runtime's minor page faults over the same span. */
  deleteMinorFaults: number;
  running: number;
  /** The runtime's RSS with the images pulled, before the burst, and once every pod runs (MB). */
  rssIdle: number;
  /** The idle RSS by backing, read just after rssIdle. */
  splitIdle: ResidentSplit;
  rssAfter: number;
  /** The slowest Version answer during the deletion (ms). */
  worstVersionMs: number;
  /** Wall time from the first deletion until every container stopped (s). */
  deletionS: number;
  steady?: SteadyResult;
  /** What ran beside this arm: the 1-minute load average at its start and end, a VM seen. */
  load: { start: number; end: number; vm: boolean };
}

/** Whether a VM (a qemu-system process) runs on this machine now. */
function vmRunning(): boolean {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").startsWith("qemu-system")) return true;
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}

/** The program an arm's runtime process runs: whose pages its idle RSS counts as its own executable's. */
function armProgram(arm: Arm): string {
  if (arm.executable) return arm.executable;
  if (arm.criDockerd) return arm.criDockerd;
  if (arm.containerd) return join(arm.containerd.binDir, "containerd");
  return arm.deno ? realpathSync(join(REPO_ROOT, "node_modules/.bin/deno")) : process.execPath;
}

/**
 * Drops a program's pages from the page cache, so that every arm starts as
 * after a node's boot, its pages read in by the kernel's readahead. How a
 * file came into the cache decides how much of it one fault maps on this
 * kernel: the same executable, idle, kept 69 MB of its own pages resident
 * when started just after it was written and 51 MB when started from the
 * cache a read had filled. GNU dd's nocache with no count asks the kernel
 * to drop the whole file (pages a running process maps stay).
 */
function evictFromPageCache(file: string): void {
  execFileSync("dd", [`if=${file}`, "iflag=nocache", "count=0", "status=none"]);
}

async function burst(arm: Arm, evented: boolean, showBreakdown: boolean): Promise<BurstResult> {
  const metrics = arm.metrics;
  evictFromPageCache(armProgram(arm));
  const loadStart = loadavg()[0]!;
  let vm = vmRunning();
  // Looked for every 5 s while the arm runs: a VM test beside it takes a core.
  const vmWatch = setInterval(() => (vm ||= vmRunning()), 5000);
  const env = await KubeletEnv.start({
    evented,
    metrics,
    cridockEntry: arm.entry,
    cridockExecutable: arm.executable,
    cridockRuntime: arm.deno ? "deno" : undefined,
    criDockerd: arm.criDockerd,
    containerd: arm.containerd,
    cridockNodeFlags: isCridock(arm) && !arm.executable && !arm.deno ? cridockNodeFlags : undefined,
    cridockEnv: isCridock(arm) && !arm.entry ? CRIDOCK_ENV : undefined,
    // kubelet's own defaults for its periodic work (the harness shortens them
    // for the tests' sake): the log manager's ContainerStatus of every running
    // container each 10 s, and each pod's sync each minute.
    config: { containerLogMonitorInterval: "10s", syncFrequency: "1m" },
    kubeletPort: 10351,
    bridge: "cridock-kb0",
    dockerBridge: "cridock-kbd",
    subnet: "10.98.0.0/24",
  });
  try {
    // The images are pulled before the burst: the bench measures starts, not the registry.
    for (const image of [PAUSE_IMAGE, BUSYBOX_IMAGE]) await env.cridock.client.imageCall("PullImage", { image: { image } });
    const names = Array.from({ length: PODS }, (_, i) => `bench-${i}`);
    const pid = env.cridock.child.pid!;
    await sleep(2000);
    const rssIdle = await rssMb(pid);
    const splitIdle = await residentSplit(pid);
    const idleMonotonic = monotonicMicros();
    await heapSnapshot(pid, "idle");
    const scrapeBefore = metrics ? await env.metrics() : undefined;
    const cpuBefore = cpuSeconds(pid);
    const threadsBefore = threadCpuSample(pid);
    const written = new Map<string, number>();
    const from = Date.now();
    await Promise.all(
      names.map(async (name) => {
        written.set(env.podName(name), Date.now());
        await env.writePod({
          metadata: { name, namespace: "default" },
          spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: BUSYBOX_IMAGE, command: ["sleep", "3600"] }] },
        });
      }),
    );
    const runningAt = new Map<string, number>();
    const deadline = Date.now() + 300_000;
    while (runningAt.size < PODS && Date.now() < deadline) {
      const now = Date.now();
      for (const p of await env.pods()) {
        if (runningAt.has(p.metadata.name) || !written.has(p.metadata.name)) continue;
        const cs = p.status.containerStatuses ?? [];
        if (cs.length > 0 && cs.every((c) => c.ready && c.state.running)) runningAt.set(p.metadata.name, now);
      }
      await sleep(100);
    }
    const result: BurstResult = {
      running: runningAt.size,
      allRunningS: (Date.now() - from) / 1000,
      cpuS: cpuSeconds(pid) - cpuBefore,
      deleteCpuS: 0,
      deleteMinorFaults: 0,
      latencies: [...runningAt].map(([name, at]) => (at - written.get(name)!) / 1000).sort((a, b) => a - b),
      rssIdle,
      splitIdle,
      rssAfter: await rssMb(pid),
      worstVersionMs: 0,
      deletionS: 0,
      load: { start: loadStart, end: NaN, vm },
    };
    const threadsBurst = threadCpuDelta(threadsBefore, threadCpuSample(pid));
    const splitAfter = await residentSplit(pid);
    const runningMonotonic = monotonicMicros();
    await heapSnapshot(pid, "after the burst");
    if (showBreakdown && scrapeBefore) printBreakdown(scrapeBefore, await env.metrics());
    if (STEADY_S > 0) result.steady = await steadyWindow(env, arm, pid);

    // Deletion, with Version and Status sampled all along (they must answer fast whatever runs).
    let worstVersion = 0;
    let worstStatus = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const a = performance.now();
        await env.cridock.client.call("Version", {});
        worstVersion = Math.max(worstVersion, performance.now() - a);
        const b = performance.now();
        await env.cridock.client.call("Status", {});
        worstStatus = Math.max(worstStatus, performance.now() - b);
        await sleep(50);
      }
    })();
    // prom-client's event-loop delay histogram restarts at each scrape: this one opens the window.
    if (metrics) await env.metrics();
    const deleting = Date.now();
    const deletingMonotonic = monotonicMicros();
    const cpuBeforeDelete = cpuSeconds(pid);
    const threadsBeforeDelete = threadCpuSample(pid);
    const faultsBeforeDelete = minorFaults(pid);
    for (const name of names) await env.deletePod(name);
    const gone = Date.now() + 180_000;
    while ((await env.runningPodContainers()) > 0 && Date.now() < gone) await sleep(500);
    result.deleteCpuS = cpuSeconds(pid) - cpuBeforeDelete;
    result.deleteMinorFaults = minorFaults(pid) - faultsBeforeDelete;
    const threadsDeletion = threadCpuDelta(threadsBeforeDelete, threadCpuSample(pid));
    sampling = false;
    await sampler;
    result.worstVersionMs = worstVersion;
    const deletedMonotonic = monotonicMicros();
    const deletionS = (Date.now() - deleting) / 1000;
    result.deletionS = deletionS;
    // Whether a slow Version waited on cridock's own event loop or for a CPU.
    const loopDelay = metrics ? (await env.metrics()).get("cridock_nodejs_eventloop_lag_max_seconds") : undefined;
    console.log(
      `[${arm.name}] deletion: all containers stopped after ${deletionS.toFixed(1)} s; ` +
        `${result.deleteMinorFaults} minor page faults; ` +
        `slowest Version ${worstVersion.toFixed(1)} ms, slowest Status ${worstStatus.toFixed(1)} ms meanwhile` +
        (loopDelay === undefined ? "" : `; cridock's longest event-loop delay ${(loopDelay * 1000).toFixed(1)} ms`),
    );
    if (isCridock(arm)) {
      console.log(`[${arm.name}] CPU by thread over the burst: ${formatThreadCpu(threadsBurst)}; over the deletion: ${formatThreadCpu(threadsDeletion)}`);
      await sleep(2000);
      console.log(`[${arm.name}] pid ${pid}: idle ${formatSplit(splitIdle)}; after the burst ${formatSplit(splitAfter)}; after the deletion ${formatSplit(await residentSplit(pid))}`);
      console.log(
        `[${arm.name}] pid ${pid}, CLOCK_MONOTONIC µs (a CPU profile's clock): idle read at ${idleMonotonic}, all running read at ${runningMonotonic}, ` +
          `deletion from ${deletingMonotonic} to ${deletedMonotonic}`,
      );
      await heapSnapshot(pid, "after the deletion");
      if (SETTLE_S > 0) {
        await sleep(SETTLE_S * 1000);
        console.log(`[${arm.name}] pid ${pid}: ${SETTLE_S} s after the deletion ${formatSplit(await residentSplit(pid))}`);
      }
    }
    result.load = { start: loadStart, end: loadavg()[0]!, vm };
    console.log(`[${arm.name}] load average ${loadStart.toFixed(2)} at the start, ${result.load.end.toFixed(2)} at the end${vm ? "; a VM (qemu-system) ran meanwhile" : ""}`);
    return result;
  } finally {
    clearInterval(vmWatch);
    await env.destroy();
  }
}

function report(arm: Arm, results: BurstResult[]): void {
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
  console.log(
    `  ${arm.name.padEnd(34)} running ${results.map((r) => `${r.running}/${PODS}`).join(", ")}; ` +
      `all Running after ${median(results.map((r) => r.allRunningS)).toFixed(1)} s; ` +
      `start latency p50/p90/p99 ${percentile(latencies, 50).toFixed(2)} / ${percentile(latencies, 90).toFixed(2)} / ${percentile(latencies, 99).toFixed(2)} s; ` +
      `runtime CPU burst ${median(results.map((r) => r.cpuS)).toFixed(2)} s + deletion ${median(results.map((r) => r.deleteCpuS)).toFixed(2)} s; ` +
      `RSS idle ${median(results.map((r) => r.rssIdle)).toFixed(1)} MB, after the burst ${median(results.map((r) => r.rssAfter)).toFixed(1)} MB`,
  );
}

/** Each round's figures of this tree over another runtime's (the same round, one after the other). */
function ratios(mine: BurstResult[], theirs: BurstResult[], other: string): void {
  console.log(`| round | measure | cridock | ${other} | ratio |\n|---|---|---|---|---|`);
  for (const [i, a] of mine.entries()) {
    const b = theirs[i]!;
    const row = (label: string, x: number, y: number, digits: number) =>
      console.log(`| ${i + 1} | ${label} | ${x.toFixed(digits)} | ${y.toFixed(digits)} | ${y > 0 ? `${(x / y).toFixed(2)}×` : "–"} |`);
    row("runtime CPU, burst + deletion (s)", a.cpuS + a.deleteCpuS, b.cpuS + b.deleteCpuS, 2);
    row("start latency p50 (s)", percentile(a.latencies, 50), percentile(b.latencies, 50), 2);
    row("start latency p90 (s)", percentile(a.latencies, 90), percentile(b.latencies, 90), 2);
    row("RSS idle (MB)", a.rssIdle, b.rssIdle, 1);
    row("RSS after the burst, over idle (MB)", a.rssAfter - a.rssIdle, b.rssAfter - b.rssIdle, 1);
    row("slowest Version during deletion (ms)", a.worstVersionMs, b.worstVersionMs, 1);
    row("minor page faults during deletion", a.deleteMinorFaults, b.deleteMinorFaults, 0);
    row("all Running after (s)", a.allRunningS, b.allRunningS, 1);
    row("deletion, until every container stopped (s)", a.deletionS, b.deletionS, 1);
    if (a.steady && b.steady) {
      row(`steady ${STEADY_S} s: runtime CPU (s)`, a.steady.runtimeCpuS, b.steady.runtimeCpuS, 2);
      row(`steady ${STEADY_S} s: engine CPU (s; dockerd, none apart for containerd)`, a.steady.engineCpuS, b.steady.engineCpuS, 2);
      row(`steady ${STEADY_S} s: runtime + engine CPU (s)`, a.steady.runtimeCpuS + a.steady.engineCpuS, b.steady.runtimeCpuS + b.steady.engineCpuS, 2);
      row("PLEG relist mean (ms)", a.steady.plegRelistMs, b.steady.plegRelistMs, 1);
      row("Summary API median (ms)", a.steady.summaryMs, b.steady.summaryMs, 0);
      row("ListContainers median (ms)", a.steady.listContainersMs, b.steady.listContainersMs, 1);
      row("ListPodSandbox median (ms)", a.steady.listSandboxesMs, b.steady.listSandboxesMs, 1);
    }
  }
}

// Compared arms run alike, without metrics (older trees may not serve them);
// the breakdown then comes from one extra burst of this tree that is not counted.
const executables = values["compare-executable"]!;
const comparing = Boolean(values.compare || values["compare-cri-dockerd"] || values["compare-containerd"] || executables.length || values["compare-deno"]);
// --compare-metrics: both trees serve /metrics (the other must have --metrics-bind-addr), for the event-loop delay of each.
const bothMetrics = Boolean(values.compare && values["compare-metrics"]);
const withTree = !values["no-tree"];
const arms: Arm[] = withTree ? [{ name: "this tree", metrics: !comparing || bothMetrics }] : [];
if (values.compare) arms.push({ name: `compare (${values.compare})`, entry: values.compare, metrics: bothMetrics });
for (const given of executables) {
  // name=path; a path alone is named after its file.
  const eq = given.indexOf("=");
  const [name, executable] = eq > 0 ? [given.slice(0, eq), given.slice(eq + 1)] : [`executable (${basename(given)})`, given];
  arms.push({ name, executable, metrics: false });
}
/** The first line a runtime prints for --version (for the arm's name and the record's note). */
function versionOf(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 }).trim().split("\n")[0]!;
  } catch {
    return "version unknown";
  }
}
if (values["compare-deno"]) {
  const deno = versionOf(join(REPO_ROOT, "node_modules/.bin/deno"), ["--version"]).replace(/ \(.*$/, "");
  arms.push({ name: `cridock on ${deno.replace(/^deno/, "Deno")}`, deno: true, metrics: false });
}
if (!arms.some(isCridock)) throw new Error("no cridock arm: --no-tree wants --compare, --compare-executable or --compare-deno");
if (values["compare-cri-dockerd"]) arms.push({ name: "cri-dockerd", criDockerd: values["compare-cri-dockerd"], metrics: false });
const criDockerdVersion = values["compare-cri-dockerd"] ? versionOf(values["compare-cri-dockerd"], ["--version"]) : undefined;
if (values["compare-containerd"]) {
  // The same runc as the Docker arms' engine (Engine 29's build has its own beside dockerd).
  const runcDir = process.env.CRIDOCK_TEST_DOCKERD_BIN ? dirname(process.env.CRIDOCK_TEST_DOCKERD_BIN) : undefined;
  arms.push({ name: "containerd", containerd: { binDir: values["compare-containerd"], runcDir }, metrics: false });
}

// The record: per PLEG mode, each arm's medians (recordResult, once at the end).
const recorded: { mode: string; figures: ArmFigures[] }[] = [];
const loads: string[] = [];
const medianOf = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
for (const mode of values.modes!.split(",").map((m) => m.trim())) {
  const evented = mode === "evented";
  console.log(`\n== ${evented ? "evented" : "generic"} PLEG: ${PODS}-pod burst, ${ROUNDS} round(s) ==`);
  const results = new Map<Arm, BurstResult[]>(arms.map((a) => [a, []]));
  if (withTree && comparing && !bothMetrics) await burst({ name: "this tree, for the breakdown (not counted)", metrics: true }, evented, true);
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order each round so neither arm always runs on a warmer machine.
    const order = round % 2 === 0 ? arms : [...arms].reverse();
    for (const arm of order) {
      const result = await burst(arm, evented, round === 0 && arm.metrics);
      results.get(arm)!.push(result);
      // Printed as it comes, so an arm that fails later does not take this one's figures with it.
      report(arm, [result]);
    }
  }
  console.log(`${evented ? "evented" : "generic"} PLEG results:`);
  for (const arm of arms) report(arm, results.get(arm)!);
  for (const arm of arms) {
    const rs = results.get(arm)!;
    if (rs.length === 0) continue;
    const latencies = rs.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const steady = rs.map((r) => r.steady).filter((s): s is SteadyResult => s !== undefined);
    const figures: ArmFigures = {
      name: arm.name,
      cridock: isCridock(arm),
      allRunningS: medianOf(rs.map((r) => r.allRunningS)),
      p50S: percentile(latencies, 50),
      p90S: percentile(latencies, 90),
      deletionS: medianOf(rs.map((r) => r.deletionS)),
      burstCpuS: medianOf(rs.map((r) => r.cpuS)),
      deleteCpuS: medianOf(rs.map((r) => r.deleteCpuS)),
      rssIdleMb: medianOf(rs.map((r) => r.rssIdle)),
      rssIdleSplit: {
        anonymousMb: medianOf(rs.map((r) => r.splitIdle.anonymous)),
        ownExecutableMb: medianOf(rs.map((r) => r.splitIdle.ownExecutable)),
        otherFilesMb: medianOf(rs.map((r) => r.splitIdle.fileBacked - r.splitIdle.ownExecutable)),
      },
      rssAfterBurstMb: medianOf(rs.map((r) => r.rssAfter)),
      ...(steady.length > 0
        ? {
            steady: {
              seconds: STEADY_S,
              runtimeCpuS: medianOf(steady.map((x) => x.runtimeCpuS)),
              engineCpuS: medianOf(steady.map((x) => x.engineCpuS)),
              plegRelistMs: medianOf(steady.map((x) => x.plegRelistMs)),
              summaryMs: medianOf(steady.map((x) => x.summaryMs)),
              listContainersMs: medianOf(steady.map((x) => x.listContainersMs)),
              listSandboxesMs: medianOf(steady.map((x) => x.listSandboxesMs)),
              rssHeldMb: medianOf(steady.map((x) => x.rssHeldMb)),
            },
          }
        : {}),
    };
    let entry = recorded.find((r) => r.mode === mode);
    if (!entry) recorded.push((entry = { mode, figures: [] }));
    entry.figures.push(figures);
    loads.push(
      `${arm.name}: ${rs.map((r) => `${r.load.start.toFixed(1)} to ${r.load.end.toFixed(1)}${r.load.vm ? ", a VM running" : ""}`).join("; ")}`,
    );
  }
  for (const mine of arms.filter(isCridock)) {
    for (const other of arms.filter((a) => !isCridock(a))) {
      console.log(`${mine.name} against ${other.name}:`);
      ratios(results.get(mine)!, results.get(other)!, other.name);
    }
  }
}
/** A path outside this tree, which names nothing on another machine: its last part alone, as <part>. */
const portable = (arg: string): string => {
  const eq = arg.indexOf("=");
  const [prefix, value] = eq > 0 && !arg.startsWith("/") ? [arg.slice(0, eq + 1), arg.slice(eq + 1)] : ["", arg];
  return value.startsWith("/") && !value.startsWith(REPO_ROOT) ? `${prefix}<${basename(value)}>` : arg;
};
function withoutNote(argv: string[]): string[] {
  return argv.filter((arg, i) => !arg.startsWith("--note") && argv[i - 1] !== "--note");
}
if (recorded.length > 0) {
  const modes = recorded.length > 1;
  // One table; with several PLEG modes, the mode heads each figure.
  const tables = recorded.map((r) => ({ mode: r.mode, ...podsTable(PODS, r.figures) }));
  recordResult("kubelet-pods", {
    // --note's text is the note's end, not repeated in the command.
    command: commandLine("scripts/bench/kubelet-pods.ts", withoutNote(process.argv.slice(2)).map(portable)),
    columns: tables[0]!.columns,
    rows: tables.flatMap((t) => t.rows.map((row) => (modes ? [`${t.mode} PLEG: ${row[0]}`, ...row.slice(1)] : row))),
    note:
      `${PODS} static pods at once through one real kubelet at its defaults, ${modes ? "each PLEG mode" : `${recorded[0]!.mode} PLEG`}, ` +
      `${ROUNDS} round(s)${ROUNDS > 1 ? ", medians" : ""}, the arms one after the other on the same private engine build` +
      `${process.env.CRIDOCK_TEST_DOCKERD_BIN ? ` (${versionOf(process.env.CRIDOCK_TEST_DOCKERD_BIN, ["--version"])})` : ""}` +
      `${criDockerdVersion ? `; ${criDockerdVersion}` : ""}. Load average (1 min) at each arm's start and end: ${loads.join("; ")}.` +
      `${values.note ? ` ${values.note}` : ""}`,
  });
}
