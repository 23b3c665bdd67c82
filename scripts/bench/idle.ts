/**
 * Benchmark: what a runtime costs while nothing happens, and what logging
 * costs it. For each runtime (cridock, and cri-dockerd beside it with
 * --compare-cri-dockerd), on the test engine and a CNI network:
 *
 *   idle     one pod with N silent containers (`sleep`, with CRI log paths,
 *            so cridock follows every log), for each N of --counts: CPU over
 *            --seconds as a share of one core (/proc/<pid>/stat), system
 *            calls per second (strace -c -f -p, after the CPU window so
 *            strace's own cost stays out of it) and RSS.
 *            Targets: ≤ 0.5% of a core and ≤ 20 syscalls/s at 40 and 150.
 *   logging  one container printing 100-byte numbered lines at each rate of
 *            --log-rates (MB/s): the runtime's CPU ms per MB the container
 *            logged over --log-seconds (the MB counted from the line numbers
 *            in the CRI log, whoever writes it). Target ≤ 8 ms/MB.
 *            cri-dockerd writes no log itself (the CRI path is a symlink to
 *            Docker's file), so its figure is the floor: dockerd pays.
 *
 *   tsx scripts/bench/idle.ts [--counts 40,150] [--seconds 30] [--strace-seconds 60]
 *       [--log-rates 1,10] [--log-seconds 10] [--runtime node|deno] [--compare-cri-dockerd <binary>]
 *       [--compare-cridock <other tree's bin/cridock.js>] [--cpu-prof <dir>]
 *
 * --cpu-prof writes a V8 CPU profile of each cridock on Node into a
 * directory (one file per process, written when it stops).
 *
 * Needs the test environment (scripts/env/setup.sh), root, and strace for
 * the syscall figures (without it they print as "n/a").
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { BUSYBOX_IMAGE, makeCniConfDir } from "../../test/helpers/env.ts";
import { cpuProfileFlags, monotonicMicros } from "./lib/cpu-profile.ts";
import { countSyscalls, cpuSeconds, rssMb, type SyscallCount } from "./lib/proc-usage.ts";
import { commandLine, recordResult } from "./lib/results.ts";
import { runtimeName, startRuntime, type RuntimeKind, type RuntimeUnderTest } from "./lib/runtimes.ts";

const { values } = parseArgs({
  options: {
    counts: { type: "string", default: "40,150" },
    seconds: { type: "string", default: "30" },
    "settle-seconds": { type: "string", default: "5" },
    // A quiet container's safety polls back off from 2 s to minutes: a few
    // seconds of strace can fall between two rounds of them and count ~0.
    "strace-seconds": { type: "string", default: "60" },
    "log-rates": { type: "string", default: "1,10" },
    "log-seconds": { type: "string", default: "10" },
    runtime: { type: "string", default: "node" },
    "compare-cri-dockerd": { type: "string" },
    "compare-cridock": { type: "string" },
    "cpu-prof": { type: "string" },
  },
});
const counts = values.counts.split(",").map(Number).filter((n) => n > 0).sort((a, b) => a - b);
const windowS = Number(values.seconds);
const settleMs = Number(values["settle-seconds"]) * 1000;
const straceS = Number(values["strace-seconds"]);
const logRates = values["log-rates"].split(",").map(Number).filter((n) => n > 0);
const logWindowS = Number(values["log-seconds"]);
if (values.runtime !== "node" && values.runtime !== "deno") throw new Error("--runtime is node or deno");
const profiled = cpuProfileFlags(values["cpu-prof"]);
const runtimes: RuntimeKind[] = [
  { kind: "cridock", runtime: values.runtime, nodeFlags: values.runtime === "node" ? profiled : undefined },
  ...(values["compare-cri-dockerd"] ? [{ kind: "cri-dockerd" as const, binary: values["compare-cri-dockerd"] }] : []),
  ...(values["compare-cridock"] ? [{ kind: "cridock" as const, runtime: "node" as const, entry: values["compare-cridock"], nodeFlags: profiled }] : []),
];

const LINE_BYTES = 100;
const BRIDGE = "cridock-idle0";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface IdleFigure {
  containers: number;
  cpuPercent: number;
  syscalls: SyscallCount | undefined;
  rss: number;
}
interface LogFigure {
  targetMbps: number;
  mbps: number;
  cpuMsPerMb: number;
}
interface Result {
  name: string;
  rssEmpty: number;
  idle: IdleFigure[];
  logging: LogFigure[];
}

/** Runs `fn` over `items` with at most `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: width }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
  }));
}

/** The number of the last whole numbered line in the log at `path` (a CRI file or cri-dockerd's symlink to Docker's). */
async function lastLineNumber(path: string): Promise<number> {
  const f = await open(path, "r").catch(() => undefined);
  if (!f) return 0;
  try {
    const size = (await f.stat()).size;
    const tail = Buffer.alloc(Math.min(size, 64 * 1024));
    await f.read(tail, 0, tail.length, size - tail.length);
    const numbers = [...tail.toString("latin1").matchAll(/(\d{8}) x{16}/g)];
    return numbers.length > 0 ? Number(numbers[numbers.length - 1]![1]) : 0;
  } finally {
    await f.close();
  }
}

async function measure(kind: RuntimeKind): Promise<Result> {
  const cni = await makeCniConfDir({ bridge: BRIDGE, subnet: "10.94.0.0/24", networkName: "cridock-idle" });
  const logDir = await mkdtemp(join(tmpdir(), "cridock-bench-idle-"));
  let rt: RuntimeUnderTest | undefined;
  const result: Result = { name: runtimeName(kind), rssEmpty: NaN, idle: [], logging: [] };
  const containers: string[] = [];
  let podSandboxId = "";
  try {
    rt = await startRuntime(kind, cni);
    const client = rt.client;
    await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
    await sleep(settleMs);
    result.rssEmpty = await rssMb(rt.pid);
    const config = {
      metadata: { name: "idle", namespace: "bench-idle", uid: `idle-${process.pid}-${Date.now()}`, attempt: 0 },
      logDirectory: logDir,
      linux: {},
    };
    podSandboxId = (await client.call("RunPodSandbox", { config })).podSandboxId;
    const run = async (name: string, command: string[]) => {
      const { containerId } = await client.call("CreateContainer", {
        podSandboxId,
        config: { metadata: { name, attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command, logPath: `${name}.log` },
        sandboxConfig: config,
      });
      await client.call("StartContainer", { containerId });
      return containerId as string;
    };

    for (const n of counts) {
      const names = Array.from({ length: n - containers.length }, (_, i) => `silent-${containers.length + i}`);
      await pool(names, 6, async (name) => containers.push(await run(name, ["sleep", "36000"])));
      await sleep(settleMs);
      const cpu0 = await cpuSeconds(rt.pid);
      await sleep(windowS * 1000);
      const cpu = (await cpuSeconds(rt.pid)) - cpu0;
      const rss = await rssMb(rt.pid);
      const syscalls = countSyscalls(rt.pid, straceS);
      result.idle.push({ containers: n, cpuPercent: (cpu / windowS) * 100, syscalls, rss });
      console.log(
        `${result.name}: ${n} silent containers: CPU ${cpu.toFixed(2)} s in ${windowS} s = ${((cpu / windowS) * 100).toFixed(2)}% of a core; ` +
          `${syscalls ? `${syscalls.perSecond.toFixed(1)} syscalls/s (${syscalls.top.map((t) => `${t.name} ${t.perSecond.toFixed(1)}`).join(", ")})` : "syscalls n/a (strace)"}; RSS ${rss.toFixed(1)} MB`,
      );
    }
    await pool(containers.splice(0), 6, async (containerId) => {
      await client.call("StopContainer", { containerId, timeout: 0n });
      await client.call("RemoveContainer", { containerId });
    });

    for (const rate of logRates) {
      const perTick = Math.round((rate * 1e6) / LINE_BYTES / 10);
      // 100-byte lines: an 8-digit number, a space, 90 x's; `perTick` of them every 100 ms.
      const awk = `BEGIN { pad = sprintf("%90s", ""); gsub(/ /, "x", pad); n = 0; while (1) { for (i = 0; i < ${perTick}; i++) printf "%08d %s\\n", ++n, pad; fflush(); system("sleep 0.1") } }`;
      const name = `logger-${rate}`;
      const id = await run(name, ["awk", awk]);
      containers.push(id);
      const path = join(logDir, `${name}.log`);
      await sleep(3000);
      const [cpu0, line0, t0] = [await cpuSeconds(rt.pid), await lastLineNumber(path), performance.now()];
      const from = monotonicMicros();
      await sleep(logWindowS * 1000);
      const [cpu1, line1, t1] = [await cpuSeconds(rt.pid), await lastLineNumber(path), performance.now()];
      // A CPU profile's sample times are on the same monotonic clock (microseconds): this places the window in it.
      if (profiled) console.error(`logging at ${rate} MB/s of ${rt.name} pid ${rt.pid}: monotonic ${from}..${monotonicMicros()} µs`);
      const mb = ((line1 - line0) * LINE_BYTES) / 1e6;
      const figure = { targetMbps: rate, mbps: mb / ((t1 - t0) / 1000), cpuMsPerMb: mb > 0 ? ((cpu1 - cpu0) * 1000) / mb : NaN };
      result.logging.push(figure);
      console.log(
        `${result.name}: logging at ${figure.mbps.toFixed(2)} MB/s (asked ${rate}): CPU ${(cpu1 - cpu0).toFixed(2)} s for ${mb.toFixed(1)} MB = ${figure.cpuMsPerMb.toFixed(2)} ms per MB`,
      );
      await client.call("StopContainer", { containerId: id, timeout: 0n });
      await client.call("RemoveContainer", { containerId: id });
      containers.pop();
    }
  } finally {
    if (rt) {
      const client = rt.client;
      await pool(containers, 6, async (containerId) => {
        await client.call("StopContainer", { containerId, timeout: 0n }).catch(() => undefined);
        await client.call("RemoveContainer", { containerId }).catch(() => undefined);
      });
      if (podSandboxId) {
        await client.call("StopPodSandbox", { podSandboxId }).catch(() => undefined);
        await client.call("RemovePodSandbox", { podSandboxId }).catch(() => undefined);
      }
      await rt.stop();
    }
    await cni.cleanup();
    await rm(logDir, { recursive: true, force: true });
    spawnSync("ip", ["link", "delete", BRIDGE], { stdio: "ignore" });
  }
  return result;
}

const results: Result[] = [];
for (const kind of runtimes) results.push(await measure(kind));

// One table, the runtimes side by side, and the first one's figure over the second's when more ran.
const header = ["measure", ...results.map((r) => r.name), ...(results.length > 1 ? ["ratio"] : [])];
const rows: string[][] = [];
const row = (label: string, figures: number[], digits: number) => {
  const [a, b] = figures;
  const ratio = figures.length < 2 ? [] : Number.isFinite(a) && Number.isFinite(b) && b! > 0 ? [`${(a! / b!).toFixed(1)}×`] : ["–"];
  rows.push([label, ...figures.map((f) => (Number.isFinite(f) ? f.toFixed(digits) : "n/a")), ...ratio]);
};
row("RSS idle, no pods (MB)", results.map((r) => r.rssEmpty), 1);
for (const [i, n] of counts.entries()) {
  row(`idle CPU, ${n} silent containers (% of a core)`, results.map((r) => r.idle[i]?.cpuPercent ?? NaN), 2);
  row(`syscalls/s, ${n} silent containers`, results.map((r) => r.idle[i]?.syscalls?.perSecond ?? NaN), 1);
  row(`RSS, ${n} silent containers (MB)`, results.map((r) => r.idle[i]?.rss ?? NaN), 1);
}
for (const [i, rate] of logRates.entries()) row(`logging CPU at ${rate} MB/s (ms per MB)`, results.map((r) => r.logging[i]?.cpuMsPerMb ?? NaN), 2);
console.log(`\n| ${header.join(" | ")} |\n|${header.map(() => "---").join("|")}|`);
for (const r of rows) console.log(`| ${r.join(" | ")} |`);
recordResult("idle", { command: commandLine("scripts/bench/idle.ts"), columns: header, rows });
