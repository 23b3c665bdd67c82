/**
 * Benchmark: ExecSync through cridock against the floor, the Docker calls
 * any dockershim needs (exec create, start with the hijacked stream read to
 * its end, inspect for the exit code), interleaved in one run; prints both
 * medians, their ratio and the processes spawned per call. --compare adds a
 * second cridock (another tree's bin/cridock.js) to the same rounds, and
 * --compare-cri-dockerd a cri-dockerd binary (built outside the repository,
 * on a CNI network since it has no no-op plugin); each runtime's CPU
 * seconds over its own calls (/proc/<pid>/stat around each call) and its
 * RSS after the rounds are printed beside its latency. Then
 * exec stream throughput (skipped with --mib 0): `crictl exec` (SPDY and
 * WebSocket) reading N MiB of stdout, against the same bytes read straight
 * from Docker's exec stream.
 *
 * --cpu-prof <dir> writes a V8 CPU profile of each cridock process there
 * (written when it stops).
 *
 *   npx tsx scripts/bench/exec.ts [--rounds 200] [--mib 512] [--compare <bin/cridock.js>]
 *       [--compare-cri-dockerd <binary>] [--cpu-prof <dir>]
 */
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { DockerClient } from "../../src/docker/client.ts";
import { silentLogger } from "../../src/log.ts";
import { startCridockProcess, type CridockProcess } from "../../test/helpers/cridock-process.ts";
import { median, spawnedPerOperation, stepBreakdown } from "./lib/stats.ts";
import { BUSYBOX_IMAGE, CRICTL, makeCniConfDir, PAUSE_IMAGE, type CniConfDir } from "../../test/helpers/env.ts";
import { cpuProfileFlags } from "./lib/cpu-profile.ts";
import { cpuSeconds, rssMb } from "./lib/proc-usage.ts";
import { startRuntime, type RuntimeUnderTest } from "./lib/runtimes.ts";
import { commandLine, recordResult, type Cell } from "./lib/results.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "200" },
    mib: { type: "string", default: "512" },
    compare: { type: "string" },
    "compare-cri-dockerd": { type: "string" },
    "cpu-prof": { type: "string" },
  },
});
const nodeFlags = cpuProfileFlags(values["cpu-prof"]);
const ROUNDS = Number(values.rounds);
const MIB = Number(values.mib);

const DOCKER_ENDPOINT = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock";
const docker = new DockerClient({ endpoint: DOCKER_ENDPOINT, requestTimeoutMs: 120_000, logger: silentLogger });


/** What a client of the Engine API does for one ExecSync. */
async function directExec(containerId: string, cmd: string[]): Promise<number> {
  const { Id } = await docker.execCreate(containerId, { AttachStdout: true, AttachStderr: true, Cmd: cmd });
  const socket = await docker.execStart(Id, { tty: false });
  let bytes = 0;
  await new Promise<void>((resolve) => {
    socket.on("data", (d: Buffer) => (bytes += d.length));
    socket.once("end", resolve);
    socket.once("close", resolve);
  });
  socket.destroy();
  for (;;) {
    const info = await docker.execInspect(Id);
    if (!info.Running && info.ExitCode !== null) return bytes;
  }
}

/** Runs a command, counting its stdout bytes; resolves to [bytes, seconds]. */
function countOutput(command: string, args: string[]): Promise<[number, number]> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "ignore"] });
    let bytes = 0;
    child.stdout.on("data", (d: Buffer) => (bytes += d.length));
    child.once("error", reject);
    child.once("close", () => resolve([bytes, (performance.now() - t0) / 1000]));
  });
}

/** A running pod with one long-running busybox container; returns its ids. */
async function startPod(cridock: Pick<CridockProcess, "client">, tag: string): Promise<{ podSandboxId: string; containerId: string }> {
  const client = cridock.client;
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const podConfig = { metadata: { name: `bench-exec-${tag}`, namespace: "bench", uid: `bench-exec-${tag}-${process.pid}`, attempt: 0 }, linux: {} };
  const { podSandboxId } = await client.call("RunPodSandbox", { config: podConfig });
  const { containerId } = await client.call("CreateContainer", {
    podSandboxId,
    config: { metadata: { name: "bench" }, image: { image: BUSYBOX_IMAGE }, command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"], linux: {} },
    sandboxConfig: podConfig,
  });
  await client.call("StartContainer", { containerId });
  return { podSandboxId, containerId };
}

async function stopPod(cridock: Pick<CridockProcess, "client">, podSandboxId: string): Promise<void> {
  await cridock.client.call("StopPodSandbox", { podSandboxId }).catch(() => undefined);
  await cridock.client.call("RemovePodSandbox", { podSandboxId }).catch(() => undefined);
}

async function main() {
  const flags = [`--docker-endpoint=${DOCKER_ENDPOINT}`, "--network-plugin=no-op", `--pod-infra-container-image=${PAUSE_IMAGE}`];
  const cridock = await startCridockProcess({ flags, nodeFlags });
  const client = cridock.client;
  const other = values.compare ? await startCridockProcess({ flags, entry: values.compare, nodeFlags }) : undefined;
  let cni: CniConfDir | undefined;
  let criDockerd: RuntimeUnderTest | undefined;
  if (values["compare-cri-dockerd"]) {
    cni = await makeCniConfDir({ bridge: "cridock-exec0", subnet: "10.97.0.0/24", networkName: "cridock-bench-exec" });
    criDockerd = await startRuntime({ kind: "cri-dockerd", binary: values["compare-cri-dockerd"] }, cni);
  }
  let podSandboxId = "";
  let otherPod: { podSandboxId: string; containerId: string } | undefined;
  let criDockerdPod: { podSandboxId: string; containerId: string } | undefined;
  try {
    let containerId: string;
    ({ podSandboxId, containerId } = await startPod(cridock, "self"));
    if (other) otherPod = await startPod(other, "other");
    if (criDockerd) criDockerdPod = await startPod(criDockerd, "cri-dockerd");
    const cmd = ["echo", "-n", "hello"];
    /** `pid`: the runtime's process, whose CPU is summed over this arm's calls (the floor has none). */
    const arms: { name: string; run: () => Promise<unknown>; times: number[]; pid?: number; cpu: number }[] = [
      { name: "cridock", run: () => client.call("ExecSync", { containerId, cmd, timeout: 10 }), times: [], pid: cridock.child.pid, cpu: 0 },
      ...(other && otherPod
        ? [{ name: `compare (${values.compare})`, run: () => other.client.call("ExecSync", { containerId: otherPod!.containerId, cmd, timeout: 10 }), times: [], pid: other.child.pid, cpu: 0 }]
        : []),
      ...(criDockerd && criDockerdPod
        ? [{ name: "cri-dockerd", run: () => criDockerd!.client.call("ExecSync", { containerId: criDockerdPod!.containerId, cmd, timeout: 10 }), times: [], pid: criDockerd.pid, cpu: 0 }]
        : []),
      { name: "floor", run: () => directExec(containerId, cmd), times: [], cpu: 0 },
    ];

    // Warm up every path (connections, API version negotiation, caches).
    for (let i = 0; i < 10; i++) for (const arm of arms) await arm.run();
    for (let i = 0; i < ROUNDS; i++) {
      for (let k = 0; k < arms.length; k++) {
        const arm = arms[(i + k) % arms.length]!;
        const cpu0 = arm.pid ? await cpuSeconds(arm.pid) : 0;
        const t0 = performance.now();
        await arm.run();
        arm.times.push(performance.now() - t0);
        if (arm.pid) arm.cpu += (await cpuSeconds(arm.pid)) - cpu0;
      }
    }
    const floorMedian = median(arms.at(-1)!.times);
    const record: Cell[][] = [];
    const saveRecord = () =>
      recordResult("exec", { command: commandLine("scripts/bench/exec.ts"), columns: ["measure", "value"], rows: record, note: `ExecSync \`echo -n hello\`, ${ROUNDS} interleaved rounds, medians; the floor is Docker's exec create, start and inspect.` });
    console.log(`ExecSync \`echo -n hello\`, ${ROUNDS} interleaved rounds (medians; floor = exec create, start, inspect):`);
    for (const arm of arms) {
      const cost = arm.pid ? `  CPU ${((arm.cpu / ROUNDS) * 1000).toFixed(2)} ms per call, RSS ${(await rssMb(arm.pid)).toFixed(1)} MB` : "";
      console.log(`  ${arm.name.padEnd(12)} ${median(arm.times).toFixed(2)} ms  ${(median(arm.times) / floorMedian).toFixed(3)} x floor${cost}`);
      record.push([`${arm.name}: ExecSync median (ms)`, median(arm.times).toFixed(2)], [`${arm.name}: × floor`, (median(arm.times) / floorMedian).toFixed(3)]);
      if (arm.pid) record.push([`${arm.name}: CPU per call (ms)`, ((arm.cpu / ROUNDS) * 1000).toFixed(2)]);
    }
    if (criDockerd) {
      const [self, theirs] = [arms[0]!, arms.find((a) => a.name === "cri-dockerd")!];
      console.log(`  cridock / cri-dockerd: latency ${(median(self.times) / median(theirs.times)).toFixed(2)} x, CPU ${(self.cpu / theirs.cpu).toFixed(2)} x`);
    }

    // Processes and steps per call, from a debug-level instance's step timer.
    const counter = await startCridockProcess({ flags: [...flags, "--log-level=debug"] });
    try {
      const pod = await startPod(counter, "count");
      for (let i = 0; i < 5; i++) await counter.client.call("ExecSync", { containerId: pod.containerId, cmd, timeout: 10 });
      const from = counter.logs().length;
      for (let i = 0; i < 20; i++) await counter.client.call("ExecSync", { containerId: pod.containerId, cmd, timeout: 10 });
      const log = counter.logs().slice(from);
      console.log(`  processes spawned per ExecSync: cridock ${(spawnedPerOperation(log).ExecSync ?? 0) / 20}, floor 0`);
      const b = stepBreakdown(log).ExecSync;
      if (b) console.log(`  cridock ExecSync steps (medians over 20 calls at debug level, ms): total ${b.totalMs}, ${JSON.stringify(b.steps)}`);
      await stopPod(counter, pod.podSandboxId);
    } finally {
      await counter.stop();
    }
    if (MIB <= 0) {
      saveRecord();
      return;
    }

    const bytes = MIB * 1024 * 1024;
    const producer = ["head", "-c", String(bytes), "/dev/zero"];
    const t0 = performance.now();
    const got = await directExec(containerId, producer);
    const directSec = (performance.now() - t0) / 1000;
    console.log(`exec stream, direct Docker: ${MIB} MiB in ${directSec.toFixed(2)} s = ${(bytes / 1e6 / directSec).toFixed(0)} MB/s (${got} bytes with stream headers)`);
    for (const transport of ["spdy", "websocket"]) {
      const [n, sec] = await countOutput(CRICTL, ["--runtime-endpoint", `unix://${cridock.socketPath}`, "exec", "--transport", transport, containerId, ...producer]);
      if (n !== bytes) throw new Error(`crictl exec over ${transport} delivered ${n} of ${bytes} bytes`);
      console.log(`exec stream, crictl over cridock (${transport}): ${MIB} MiB in ${sec.toFixed(2)} s = ${(bytes / 1e6 / sec).toFixed(0)} MB/s (target >= 200), ${(directSec / sec).toFixed(2)}x direct`);
      record.push([`exec stream through crictl, ${transport} (MB/s)`, (bytes / 1e6 / sec).toFixed(0)]);
    }
    record.push(["exec stream, Docker directly (MB/s)", (bytes / 1e6 / directSec).toFixed(0)]);
    saveRecord();
  } finally {
    if (podSandboxId) await stopPod(cridock, podSandboxId);
    if (other && otherPod) await stopPod(other, otherPod.podSandboxId);
    if (criDockerd && criDockerdPod) await stopPod(criDockerd, criDockerdPod.podSandboxId);
    await cridock.stop();
    await other?.stop();
    await criDockerd?.stop();
    await cni?.cleanup();
    if (cni) spawn("ip", ["link", "delete", "cridock-exec0"], { stdio: "ignore" });
    await docker.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
