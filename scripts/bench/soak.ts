/**
 * Soak benchmark (not a CI test): many pod cycles through one cridock —
 * RunPodSandbox, a container that logs, StartContainer, ExecSync, a read of
 * its CRI log, ReopenContainerLog, stop and remove — sampling every 50
 * cycles what cridock holds: its RSS and open fds, and from its /metrics the
 * log followers, the connections to dockerd and Node's active timers.
 * Prints the samples, the RSS slope after warm-up (from cycle 100), and
 * each count idle before the run against idle after it.
 *
 * Goal (exit 1 otherwise): RSS ends within 20 MB of its level at cycle 100;
 * fds, log followers and Docker connections return to their idle counts;
 * timers to theirs within 2 (a periodic timer may be between two runs).
 *
 * Usage: tsx scripts/bench/soak.ts [--cycles 1000] [--parallel 3] [--snapshots]
 *                                  [--per-hour 1000 --minutes 60]
 *   --per-hour   paces the cycles' starts at this rate, as pod churn on a
 *                node comes (issue 41's churn: 1,000 pods an hour for an
 *                hour); without it cycles run back to back
 *   --minutes    with --per-hour: run this long (sets --cycles)
 *   --snapshots  writes heap snapshots of cridock at cycle 100 and at the
 *                end (Node's --heapsnapshot-signal; files land in the repo
 *                root as Heap.*.heapsnapshot) to see what holds memory.
 * Needs scripts/env/setup.sh; the engine is CRIDOCK_TEST_DOCKER_ENDPOINT.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, readlink, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startCridockProcess } from "../../test/helpers/cridock-process.ts";
import { BUSYBOX_IMAGE, CNI_BIN_DIR, PAUSE_IMAGE, makeCniConfDir } from "../../test/helpers/env.ts";
import { freePort, scrape, sum, value } from "../../test/helpers/metrics-scrape.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const { values } = parseArgs({
  options: {
    cycles: { type: "string", default: "1000" },
    parallel: { type: "string", default: "3" },
    snapshots: { type: "boolean", default: false },
    "per-hour": { type: "string" },
    minutes: { type: "string" },
  },
});
const positive = (flag: string, text: string): number => {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${flag} must be a positive number, not ${JSON.stringify(text)}`);
  return n;
};
const perHour = values["per-hour"] === undefined ? undefined : positive("per-hour", values["per-hour"]);
if (values.minutes !== undefined && perHour === undefined) throw new Error("--minutes needs --per-hour");
const cycles = perHour !== undefined && values.minutes !== undefined ? Math.round((perHour * positive("minutes", values.minutes)) / 60) : positive("cycles", values.cycles);
const parallel = positive("parallel", values.parallel);
/** Between two cycles' starts when paced; 0 runs them back to back. */
const intervalMs = perHour === undefined ? 0 : 3_600_000 / perHour;
/** Timers may differ by this many between idle before and after (a periodic one may be between two runs). */
const TIMER_SLACK = 2;
const SAMPLE_EVERY = 50;
const WARM_UP = 100;
const dockerEndpoint = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock";

const cni = await makeCniConfDir({ bridge: "cridock-soak0", subnet: "10.95.0.0/24", networkName: "cridock-soak" });
const scratch = await mkdtemp(join(tmpdir(), "cridock-soak-"));
const metricsPort = await freePort();
const cridock = await startCridockProcess({
  flags: [
    `--metrics-bind-addr=127.0.0.1:${metricsPort}`,
    `--docker-endpoint=${dockerEndpoint}`,
    `--pod-infra-container-image=${PAUSE_IMAGE}`,
    "--network-plugin=cni",
    `--cni-conf-dir=${cni.dir}`,
    `--cni-bin-dir=${CNI_BIN_DIR}`,
    `--cni-cache-dir=${join(scratch, "cache")}`,
    "--log-level=warn",
  ],
  env: values.snapshots ? { NODE_OPTIONS: "--heapsnapshot-signal=SIGUSR2" } : {},
});
const client = cridock.client;
const pid = cridock.child.pid!;

interface Sample {
  rssMb: number;
  fds: number;
  /** Log followers held, copying or done (cridock_log_followers). */
  followers: number;
  /** Connections to dockerd in both pools (cridock_docker_connections). */
  dockerConnections: number;
  /** Node's active Timeout resources (prom-client's cridock_nodejs_active_resources). */
  timers: number;
}

async function sample(): Promise<Sample> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const metrics = await scrape(metricsPort);
  return {
    rssMb: rssKb / 1024,
    fds: (await readdir(`/proc/${pid}/fd`)).length,
    followers: sum(metrics, "cridock_log_followers"),
    dockerConnections: sum(metrics, "cridock_docker_connections"),
    timers: value(metrics, 'cridock_nodejs_active_resources{type="Timeout"}'),
  };
}

const describe = (s: Sample) =>
  `rss ${s.rssMb.toFixed(1)} MB, fds ${s.fds}, log followers ${s.followers}, docker connections ${s.dockerConnections}, timers ${s.timers}`;

/** What is held idle after the run beyond what was held idle before it; empty when nothing is. */
function held(idle: Sample, end: Sample): string[] {
  const grown: string[] = [];
  if (end.fds > idle.fds) grown.push(`fds ${idle.fds}→${end.fds}`);
  if (end.followers > idle.followers) grown.push(`log followers ${idle.followers}→${end.followers}`);
  if (end.dockerConnections > idle.dockerConnections) grown.push(`docker connections ${idle.dockerConnections}→${end.dockerConnections}`);
  if (end.timers > idle.timers + TIMER_SLACK) grown.push(`timers ${idle.timers}→${end.timers}`);
  return grown;
}

/** Open fds by kind (socket, pipe, anon_inode:…, or the file), to say what an extra fd is. */
async function fdKinds(): Promise<Map<string, number>> {
  const kinds = new Map<string, number>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "gone");
    const kind = target.replace(/:\[\d+\]$/, "");
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return kinds;
}

async function snapshot(label: string): Promise<void> {
  if (!values.snapshots) return;
  const before = new Set(await readdir(process.cwd()));
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const fresh = (await readdir(process.cwd())).filter((f) => f.endsWith(".heapsnapshot") && !before.has(f));
    if (fresh.length > 0) {
      await new Promise((r) => setTimeout(r, 3000)); // let the writer finish
      await rename(fresh[0]!, `soak-${label}.heapsnapshot`);
      console.log(`heap snapshot: soak-${label}.heapsnapshot`);
      return;
    }
  }
}

async function cycle(i: number): Promise<void> {
  const config = { metadata: { name: `soak-${i}`, namespace: "soak", uid: `soak-uid-${i}`, attempt: 0 }, logDirectory: join(scratch, "logs", String(i)), linux: {} };
  const { podSandboxId } = await client.call("RunPodSandbox", { config });
  const { containerId } = await client.call("CreateContainer", {
    podSandboxId,
    config: { metadata: { name: "app", attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sh", "-c", "seq 1 200; sleep 600"], logPath: "app.log" },
    sandboxConfig: config,
  });
  await client.call("StartContainer", { containerId });
  const exec = await client.call("ExecSync", { containerId, cmd: ["echo", "soak"], timeout: 10n });
  if (exec.stdout.toString() !== "soak\n") throw new Error(`cycle ${i}: ExecSync answered ${JSON.stringify(exec.stdout.toString())}`);
  const logPath = join(config.logDirectory, "app.log");
  for (let tries = 0; !(await readFile(logPath, "utf8").catch(() => "")).includes(" stdout F 200\n"); tries++) {
    if (tries > 200) throw new Error(`cycle ${i}: the log never got its 200 lines`);
    await new Promise((r) => setTimeout(r, 25));
  }
  await rename(logPath, `${logPath}.1`);
  await client.call("ReopenContainerLog", { containerId });
  await client.call("StopContainer", { containerId, timeout: 0n });
  await client.call("RemoveContainer", { containerId });
  await client.call("StopPodSandbox", { podSandboxId });
  await client.call("RemovePodSandbox", { podSandboxId });
  await rm(config.logDirectory, { recursive: true, force: true });
}

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p[0], 0) / n;
  const my = points.reduce((s, p) => s + p[1], 0) / n;
  const num = points.reduce((s, p) => s + (p[0] - mx) * (p[1] - my), 0);
  const den = points.reduce((s, p) => s + (p[0] - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

const samples: (Sample & { cycle: number })[] = [];
let exitCode = 0;
try {
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await sample();
  const idleKinds = await fdKinds();
  console.log(`idle: ${describe(idle)}`);
  console.log(perHour === undefined ? `${cycles} cycles, ${parallel} at a time` : `${cycles} cycles at ${perHour} an hour (one every ${(intervalMs / 1000).toFixed(1)} s), up to ${parallel} at a time`);
  const started = Date.now();
  let next = 0;
  let done = 0;
  let nextSample = SAMPLE_EVERY;
  const worker = async () => {
    while (next < cycles) {
      const i = next++;
      const wait = started + i * intervalMs - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await cycle(i);
      done++;
      if (done >= nextSample) {
        nextSample += SAMPLE_EVERY;
        const s = await sample();
        samples.push({ cycle: done, ...s });
        console.log(`cycle ${String(done).padStart(5)}: ${describe(s)}, ${((Date.now() - started) / done).toFixed(0)} ms/cycle`);
        if (done === WARM_UP) await snapshot("cycle-100");
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  const tookS = (Date.now() - started) / 1000;
  console.log(`${done} cycles in ${(tookS / 60).toFixed(1)} min (${((done * 3600) / tookS).toFixed(0)} an hour)`);
  // Idle again: keep-alive connections to dockerd close after 30 s of disuse (client.ts).
  let end = await sample();
  for (let i = 0; i < 45 && held(idle, end).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    end = await sample();
  }
  await snapshot("end");
  const after = samples.filter((s) => s.cycle >= WARM_UP);
  const at100 = after[0]?.rssMb ?? end.rssMb;
  const last = after[after.length - 1]?.rssMb ?? end.rssMb;
  const perHundred = slope(after.map((s) => [s.cycle, s.rssMb])) * 100;
  const signed = (x: number) => (x >= 0 ? "+" : "") + x.toFixed(1);
  console.log(`cycles ${done}; RSS at cycle ${after[0]?.cycle ?? done}: ${at100.toFixed(1)} MB, at the last cycle ${last.toFixed(1)} MB (${signed(last - at100)} MB), idle after the run ${end.rssMb.toFixed(1)} MB (${signed(end.rssMb - at100)} MB)`);
  console.log(`RSS slope from cycle ${WARM_UP} to the end of the run: ${perHundred.toFixed(2)} MB per 100 cycles`);
  console.log(`idle before: ${describe(idle)}`);
  console.log(`idle after:  ${describe(end)}`);
  const endKinds = await fdKinds();
  const extra = [...endKinds].filter(([k, n]) => n !== (idleKinds.get(k) ?? 0)).map(([k, n]) => `${k} ${idleKinds.get(k) ?? 0}→${n}`);
  if (extra.length > 0) console.log(`fds that differ from idle: ${extra.join(", ")}`);
  const grown = held(idle, end);
  if (grown.length > 0) console.log(`held after the run beyond idle: ${grown.join(", ")}`);
  if (Math.max(last, end.rssMb) - at100 > 20 || grown.length > 0) exitCode = 1;
  recordResult("soak", {
    command: commandLine("scripts/bench/soak.ts"),
    columns: ["measure", "idle before", "during the run", "idle after"],
    rows: [
      ["RSS (MB)", idle.rssMb.toFixed(1), `${at100.toFixed(1)} at cycle ${after[0]?.cycle ?? done}, ${last.toFixed(1)} at the last (${perHundred.toFixed(2)} per 100 cycles)`, end.rssMb.toFixed(1)],
      ["open fds", idle.fds, after[after.length - 1]?.fds ?? "–", end.fds],
      ["log followers", idle.followers, after[after.length - 1]?.followers ?? "–", end.followers],
      ["Docker connections", idle.dockerConnections, after[after.length - 1]?.dockerConnections ?? "–", end.dockerConnections],
      ["Node's active timers", idle.timers, after[after.length - 1]?.timers ?? "–", end.timers],
    ],
    note: `${done} cycles in ${(tookS / 60).toFixed(1)} min${exitCode === 1 ? "; the run FAILED its growth check" : ""}.`,
  });
} catch (err) {
  console.error(err);
  exitCode = 2;
} finally {
  await cridock.stop();
  await cni.cleanup();
  await rm(scratch, { recursive: true, force: true });
  await new Promise<void>((resolve) => execFile("ip", ["link", "del", "cridock-soak0"], () => resolve()));
}
process.exit(exitCode);
