/**
 * Benchmark: a crictl workload, the way an operator or a node's scripts
 * drive a runtime, through each runtime side by side on the same engine
 * and CNI network (cridock, and cri-dockerd with --compare-cri-dockerd),
 * in alternating rounds:
 *
 *   sandbox    --cycles pod sandbox cycles (runp, stopp, rmp)
 *   create     one pod with --containers containers (create, start each)
 *   stats      --stats `crictl stats` of all of them
 *   ps         --lists `crictl ps -a`
 *   exec       --execs `crictl exec --sync` (ExecSync) of `echo hi`
 *   teardown   the containers stopped and removed, the pod stopped and removed
 *
 * Prints per runtime and round: each phase's median latency per call, the
 * runtime's CPU seconds for each phase and for the whole workload
 * (/proc/<pid>/stat, all threads, with its live children: cridock's spawn
 * helper), and its RSS after the workload; then the
 * ratios to cridock's figures taken within each round. --compare-cridock
 * adds another tree's bin/cridock.js to the rounds (before and after a
 * change, in the same conditions); --cpu-prof writes a V8 CPU profile of
 * each cridock process on Node into a directory (one file per process and
 * round, written when it stops).
 *
 *   tsx scripts/bench/crictl.ts [--rounds 2] [--cycles 10] [--containers 40] [--stats 10]
 *       [--lists 20] [--execs 20] [--compare-cri-dockerd <binary>] [--compare-cridock <bin/cridock.js>]
 *       [--runtime node|deno] [--cpu-prof <dir>]
 *
 * Needs the test environment (scripts/env/setup.sh) with crictl, and root.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { BUSYBOX_IMAGE, CRICTL, makeCniConfDir } from "../../test/helpers/env.ts";
import { median } from "./lib/stats.ts";
import { cpuProfileFlags, monotonicMicros } from "./lib/cpu-profile.ts";
import { cpuSeconds, rssMb, treeCpuSeconds } from "./lib/proc-usage.ts";
import { commandLine, recordResult, type Cell } from "./lib/results.ts";
import { runtimeName, startRuntime, type RuntimeKind } from "./lib/runtimes.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "2" },
    cycles: { type: "string", default: "10" },
    containers: { type: "string", default: "40" },
    stats: { type: "string", default: "10" },
    lists: { type: "string", default: "20" },
    execs: { type: "string", default: "20" },
    runtime: { type: "string", default: "node" },
    "compare-cri-dockerd": { type: "string" },
    "compare-cridock": { type: "string" },
    "cpu-prof": { type: "string" },
  },
});
const n = (k: "rounds" | "cycles" | "containers" | "stats" | "lists" | "execs") => Number(values[k]);
if (values.runtime !== "node" && values.runtime !== "deno") throw new Error("--runtime is node or deno");
const profiled = cpuProfileFlags(values["cpu-prof"]);
const runtimes: RuntimeKind[] = [
  { kind: "cridock", runtime: values.runtime, nodeFlags: values.runtime === "node" ? profiled : undefined },
  ...(values["compare-cri-dockerd"] ? [{ kind: "cri-dockerd" as const, binary: values["compare-cri-dockerd"] }] : []),
  ...(values["compare-cridock"] ? [{ kind: "cridock" as const, runtime: "node" as const, entry: values["compare-cridock"], nodeFlags: profiled }] : []),
];
const PHASES = ["sandbox", "create", "stats", "ps", "exec", "teardown"] as const;
type Phase = (typeof PHASES)[number];
const BRIDGE = "cridock-crictl0";
const run = promisify(execFile);

interface Figures {
  name: string;
  /** Median seconds per crictl call, per phase. */
  latency: Record<Phase, number>;
  /** Runtime CPU seconds per phase. */
  cpu: Record<Phase, number>;
  cpuTotal: number;
  /** Of cpuTotal, what the runtime's own child processes used (cridock's spawn helper). */
  cpuChildren: number;
  rss: number;
}

async function workload(kind: RuntimeKind, round: number): Promise<Figures> {
  const cni = await makeCniConfDir({ bridge: BRIDGE, subnet: "10.98.0.0/24", networkName: "cridock-crictl" });
  const scratch = await mkdtemp(join(tmpdir(), "cridock-bench-crictl-"));
  const rt = await startRuntime(kind, cni);
  const crictl = (...args: string[]) => run(CRICTL, ["--runtime-endpoint", rt.endpoint, "--image-endpoint", rt.endpoint, "--timeout", "60s", ...args], { maxBuffer: 64 << 20 });
  const latency = {} as Record<Phase, number>;
  const cpu = {} as Record<Phase, number>;
  const podFile = (name: string) => join(scratch, `${name}.pod.json`);
  /** The pod's config, and its log directory made as kubelet makes it (cri-dockerd expects it to exist). */
  const writePod = async (name: string) => {
    await mkdir(join(scratch, "logs", name), { recursive: true });
    await writeFile(podFile(name), JSON.stringify({ metadata: { name, namespace: "bench-crictl", uid: `${name}-${process.pid}-${round}`, attempt: 0 }, log_directory: join(scratch, "logs", name), linux: {} }));
  };
  /** Times every call of `calls` one after the other, and the runtime's CPU over them all. */
  const phase = async (p: Phase, calls: (() => Promise<unknown>)[]) => {
    const times: number[] = [];
    const cpu0 = await treeCpuSeconds(rt.pid);
    const from = monotonicMicros();
    for (const call of calls) {
      const t0 = performance.now();
      await call();
      times.push((performance.now() - t0) / 1000);
    }
    cpu[p] = (await treeCpuSeconds(rt.pid)) - cpu0;
    latency[p] = median(times);
    // A CPU profile's sample times are on the same monotonic clock (microseconds): this splits it by phase.
    if (profiled) console.error(`phase ${p} of ${rt.name} pid ${rt.pid}: monotonic ${from}..${monotonicMicros()} µs`);
  };
  try {
    await crictl("pull", BUSYBOX_IMAGE);
    const cpuStart = await treeCpuSeconds(rt.pid);
    const ownStart = await cpuSeconds(rt.pid);
    await phase(
      "sandbox",
      Array.from({ length: n("cycles") }, (_, i) => async () => {
        await writePod(`cycle-${i}`);
        const id = (await crictl("runp", podFile(`cycle-${i}`))).stdout.trim();
        await crictl("stopp", id);
        await crictl("rmp", id);
      }),
    );
    await writePod("work");
    const pod = (await crictl("runp", podFile("work"))).stdout.trim();
    const containers: string[] = [];
    await phase(
      "create",
      Array.from({ length: n("containers") }, (_, i) => async () => {
        const file = join(scratch, `c${i}.json`);
        await writeFile(file, JSON.stringify({ metadata: { name: `c${i}` }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "3600"], log_path: `c${i}.log`, linux: {} }));
        const id = (await crictl("create", pod, file, podFile("work"))).stdout.trim();
        await crictl("start", id);
        containers.push(id);
      }),
    );
    await phase("stats", Array.from({ length: n("stats") }, () => () => crictl("stats", "-o", "json")));
    await phase("ps", Array.from({ length: n("lists") }, () => () => crictl("ps", "-a", "-o", "json")));
    await phase("exec", Array.from({ length: n("execs") }, (_, i) => () => crictl("exec", "--sync", containers[i % containers.length]!, "echo", "hi")));
    await phase("teardown", [
      async () => {
        for (const id of containers) {
          await crictl("stop", "--timeout", "0", id);
          await crictl("rm", id);
        }
        await crictl("stopp", pod);
        await crictl("rmp", pod);
      },
    ]);
    const cpuTotal = (await treeCpuSeconds(rt.pid)) - cpuStart;
    const cpuChildren = cpuTotal - ((await cpuSeconds(rt.pid)) - ownStart);
    return { name: rt.name, latency, cpu, cpuTotal, cpuChildren, rss: await rssMb(rt.pid) };
  } catch (err) {
    console.error(`${rt.name} failed; its log:\n${rt.logs().slice(-4000)}`);
    throw err;
  } finally {
    // Whatever a failure left: every pod of this run, with its containers.
    const left = await crictl("pods", "-q", "--namespace", "bench-crictl").catch(() => ({ stdout: "" }));
    for (const id of left.stdout.split("\n").filter(Boolean)) {
      await crictl("stopp", id).catch(() => undefined);
      await crictl("rmp", "-f", id).catch(() => undefined);
    }
    await rt.stop();
    await cni.cleanup();
    await rm(scratch, { recursive: true, force: true });
    spawnSync("ip", ["link", "delete", BRIDGE], { stdio: "ignore" });
  }
}

const header = `${n("cycles")} sandbox cycles, ${n("containers")} containers, ${n("stats")} stats, ${n("lists")} ps -a, ${n("execs")} exec --sync`;
console.log(`crictl workload: ${header}; ${n("rounds")} rounds, runtimes alternating`);
const perRound: Figures[][] = [];
for (let round = 0; round < n("rounds"); round++) {
  const figures: Figures[] = [];
  // Alternate which runtime goes first, so neither always meets a warmer engine.
  const order = round % 2 === 0 ? runtimes : [...runtimes].reverse();
  for (const kind of order) {
    const f = await workload(kind, round);
    figures.push(f);
    const phases = PHASES.map((p) => `${p} ${f.latency[p].toFixed(3)} s/${f.cpu[p].toFixed(2)} s CPU`).join(", ");
    console.log(`round ${round + 1} ${runtimeName(kind)}: CPU ${f.cpuTotal.toFixed(2)} s (child processes ${f.cpuChildren.toFixed(2)} s), RSS after ${f.rss.toFixed(1)} MB; median per call / CPU per phase: ${phases}`);
  }
  perRound.push(runtimes.map((k) => figures.find((f) => f.name === runtimeName(k))!));
}

if (runtimes.length > 1) {
  // Each other runtime beside the first (this tree's cridock), round by round.
  const first = runtimeName(runtimes[0]!);
  for (let k = 1; k < runtimes.length; k++) {
    console.log(`\n| round | measure | ${first} | ${runtimeName(runtimes[k]!)} | ratio |\n|---|---|---|---|---|`);
    for (const [i, figures] of perRound.entries()) {
      const [a, b] = [figures[0]!, figures[k]!];
      const row = (label: string, x: number, y: number, digits: number) =>
        console.log(`| ${i + 1} | ${label} | ${x.toFixed(digits)} | ${y.toFixed(digits)} | ${y > 0 ? `${(x / y).toFixed(2)}×` : "–"} |`);
      row("CPU, whole workload (s)", a.cpuTotal, b.cpuTotal, 2);
      row("RSS after (MB)", a.rss, b.rss, 1);
      for (const p of PHASES) row(`${p}: median per call (s)`, a.latency[p], b.latency[p], 3);
      for (const p of PHASES) row(`${p}: CPU (s)`, a.cpu[p], b.cpu[p], 2);
    }
  }
}

// The record: every runtime's figures per round, and the first's over the second's.
{
  const names = runtimes.map((k) => runtimeName(k));
  const rows: Cell[][] = [];
  for (const [i, figures] of perRound.entries()) {
    const add = (label: string, pick: (f: Figures) => number, digits: number) => {
      const values = figures.map(pick);
      const ratio = values.length > 1 ? [values[1]! > 0 ? `${(values[0]! / values[1]!).toFixed(2)}×` : "–"] : [];
      rows.push([i + 1, label, ...values.map((v) => v.toFixed(digits)), ...ratio]);
    };
    add("CPU, whole workload (s)", (f) => f.cpuTotal, 2);
    add("RSS after (MB)", (f) => f.rss, 1);
    for (const p of PHASES) add(`${p}: CPU (s)`, (f) => f.cpu[p], 2);
  }
  recordResult("crictl", {
    command: commandLine("scripts/bench/crictl.ts"),
    columns: ["round", "measure", ...names, ...(names.length > 1 ? ["ratio"] : [])],
    rows,
    note: header,
  });
}
