/**
 * Soak benchmark (not a CI test): many pod cycles through one cridock —
 * RunPodSandbox, a container that logs, StartContainer, ExecSync, a read of
 * its CRI log, ReopenContainerLog, stop and remove — sampling cridock's RSS
 * and open fds every 50 cycles. Prints the samples, the RSS slope after
 * warm-up (from cycle 100) and the fd count against the idle count at the
 * start. Goal: RSS ends within 20 MB of its level at cycle 100, and fds
 * return to the idle count.
 *
 * Usage: tsx scripts/bench/soak.ts [--cycles 1000] [--parallel 3] [--snapshots]
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

const { values } = parseArgs({
  options: { cycles: { type: "string", default: "1000" }, parallel: { type: "string", default: "3" }, snapshots: { type: "boolean", default: false } },
});
const cycles = Number(values.cycles);
const parallel = Number(values.parallel);
const SAMPLE_EVERY = 50;
const WARM_UP = 100;
const dockerEndpoint = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock";

const cni = await makeCniConfDir({ bridge: "cridock-soak0", subnet: "10.95.0.0/24", networkName: "cridock-soak" });
const scratch = await mkdtemp(join(tmpdir(), "cridock-soak-"));
const cridock = await startCridockProcess({
  flags: [
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

async function sample(): Promise<{ rssMb: number; fds: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { rssMb: rssKb / 1024, fds: (await readdir(`/proc/${pid}/fd`)).length };
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

const samples: { cycle: number; rssMb: number; fds: number }[] = [];
let exitCode = 0;
try {
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await sample();
  const idleKinds = await fdKinds();
  console.log(`idle: rss ${idle.rssMb.toFixed(1)} MB, fds ${idle.fds}`);
  const started = Date.now();
  let next = 0;
  let done = 0;
  let nextSample = SAMPLE_EVERY;
  const worker = async () => {
    while (next < cycles) {
      const i = next++;
      await cycle(i);
      done++;
      if (done >= nextSample) {
        nextSample += SAMPLE_EVERY;
        const s = await sample();
        samples.push({ cycle: done, ...s });
        console.log(`cycle ${String(done).padStart(5)}: rss ${s.rssMb.toFixed(1)} MB, fds ${s.fds}, ${((Date.now() - started) / done).toFixed(0)} ms/cycle`);
        if (done === WARM_UP) await snapshot("cycle-100");
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  // Idle again: keep-alive connections to dockerd close after a few seconds of disuse.
  let end = await sample();
  for (let i = 0; i < 30 && end.fds > idle.fds; i++) {
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
  console.log(`fds: idle at start ${idle.fds}, idle at the end ${end.fds}`);
  const endKinds = await fdKinds();
  const extra = [...endKinds].filter(([k, n]) => n !== (idleKinds.get(k) ?? 0)).map(([k, n]) => `${k} ${idleKinds.get(k) ?? 0}→${n}`);
  if (extra.length > 0) console.log(`fds that differ from idle: ${extra.join(", ")}`);
  if (Math.max(last, end.rssMb) - at100 > 20 || end.fds > idle.fds) exitCode = 1;
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
