/**
 * Benchmark: a burst of static pods through a real kubelet and cridock (the
 * e2e environment: private dockerd, CNI, standalone kubelet), once with
 * kubelet's generic PLEG and once with evented PLEG (GetContainerEvents).
 *
 * For each mode it writes N manifests at once and reports
 * - per-pod start latency, manifest write → all containers ready, as seen on
 *   kubelet's /pods (p50/p90/p99), and kubelet's own
 *   kubelet_pod_start_sli_duration_seconds (mean);
 * - cridock's CPU time (user+system) from the write until all pods ran;
 * - where cridock's time went: each CRI method's call count, total and
 *   median milliseconds during the burst, from cridock's debug log;
 * - the slowest Version and Status answer while the pods are deleted.
 *
 *   npx tsx scripts/bench-kubelet-pods.ts [--pods 30] [--modes generic,evented]
 *
 * Needs what the e2e suite needs (root, scripts/env-setup.sh, scripts/install-kubelet.sh).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { KubeletEnv, sleep } from "../test/e2e/harness/kubelet-env.ts";
import { BUSYBOX_IMAGE } from "../test/helpers/env.ts";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "30" },
    modes: { type: "string", default: "generic,evented" },
  },
});
const PODS = Number(values.pods);
const CLOCK_TICKS = 100;

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface CallLine {
  time: number;
  method: string;
  ms: number;
}

function callsBetween(logs: string, from: number, to: number): CallLine[] {
  const out: CallLine[] = [];
  for (const line of logs.split("\n")) {
    if (!line.includes('"call ok"') && !line.includes('"call failed')) continue;
    try {
      const j = JSON.parse(line) as { time: string; method: string; ms: number };
      const time = Date.parse(j.time);
      if (time >= from && time <= to) out.push({ time, method: j.method.replace(/^runtime\.v1\./, ""), ms: j.ms });
    } catch {
      // not a log line of ours
    }
  }
  return out;
}

async function sliMean(env: KubeletEnv): Promise<number> {
  const metrics = (await env.get("/metrics")).body;
  const sum = Number(/^kubelet_pod_start_sli_duration_seconds_sum(?:\{[^}]*\})?\s+(\S+)/m.exec(metrics)?.[1] ?? NaN);
  const count = Number(/^kubelet_pod_start_sli_duration_seconds_count(?:\{[^}]*\})?\s+(\S+)/m.exec(metrics)?.[1] ?? NaN);
  return sum / count;
}

async function runMode(evented: boolean): Promise<void> {
  const mode = evented ? "evented PLEG" : "generic PLEG";
  const env = await KubeletEnv.start({ evented, cridockLogLevel: "debug", kubeletPort: 10351, bridge: "cridock-kb0", dockerBridge: "cridock-kbd", subnet: "10.98.0.0/24" });
  try {
    // The image is pulled before the burst: the bench measures starts, not the registry.
    await env.cridock.client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
    const names = Array.from({ length: PODS }, (_, i) => `bench-${i}`);
    const pid = env.cridock.child.pid!;
    const cpuBefore = cpuSeconds(pid);
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
    const to = Date.now();
    const cpu = cpuSeconds(pid) - cpuBefore;
    const latencies = [...runningAt].map(([name, at]) => (at - written.get(name)!) / 1000).sort((a, b) => a - b);
    const sli = await sliMean(env);

    console.log(`\n== ${mode}: ${PODS}-pod burst ==`);
    console.log(`running: ${runningAt.size}/${PODS} after ${((to - from) / 1000).toFixed(1)} s`);
    console.log(`start latency (manifest → Running), s: p50 ${percentile(latencies, 50).toFixed(2)}  p90 ${percentile(latencies, 90).toFixed(2)}  p99 ${percentile(latencies, 99).toFixed(2)}`);
    console.log(`kubelet_pod_start_sli_duration_seconds mean: ${sli.toFixed(2)} s`);
    console.log(`cridock CPU time during the burst: ${cpu.toFixed(2)} s (debug logging on)`);
    const calls = callsBetween(env.cridock.logs(), from, to);
    const byMethod = new Map<string, number[]>();
    for (const c of calls) byMethod.set(c.method, [...(byMethod.get(c.method) ?? []), c.ms]);
    const rows = [...byMethod].map(([method, ms]) => ({ method, n: ms.length, total: ms.reduce((a, b) => a + b, 0), median: percentile([...ms].sort((a, b) => a - b), 50), max: Math.max(...ms) }));
    rows.sort((a, b) => b.total - a.total);
    console.log("CRI calls during the burst (total ms = summed call latency, calls overlap):");
    console.log(`  ${"method".padEnd(44)} ${"calls".padStart(6)} ${"total ms".padStart(10)} ${"median".padStart(8)} ${"max".padStart(8)}`);
    for (const r of rows) console.log(`  ${r.method.padEnd(44)} ${String(r.n).padStart(6)} ${r.total.toFixed(0).padStart(10)} ${r.median.toFixed(1).padStart(8)} ${r.max.toFixed(1).padStart(8)}`);

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
    const deleting = Date.now();
    for (const name of names) await env.deletePod(name);
    const gone = Date.now() + 180_000;
    while ((await env.runningPodContainers()) > 0 && Date.now() < gone) await sleep(500);
    sampling = false;
    await sampler;
    console.log(`deletion: all containers stopped after ${((Date.now() - deleting) / 1000).toFixed(1)} s; slowest Version ${worstVersion.toFixed(1)} ms, slowest Status ${worstStatus.toFixed(1)} ms meanwhile`);
  } finally {
    await env.destroy();
  }
}

for (const mode of values.modes!.split(",")) await runMode(mode.trim() === "evented");
