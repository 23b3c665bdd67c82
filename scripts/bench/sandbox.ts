/**
 * Benchmark: the Run/Stop/Remove PodSandbox cycle through cridock against
 * the honest floor, the least a dockershim must do for it: create (with the
 * very body cridock sends), start and inspect the pause container, one CNI ADD through the configured
 * chain (on /proc/<pid>/ns/net); then one CNI DEL, stop and remove. No netns
 * handle, no loopback plugin, no checkpoint in the floor. Rounds interleave
 * the arms (rotating their order); prints medians, ratios and the processes
 * each arm spawned per cycle (cridock's from its step timer's debug lines).
 *
 *   tsx scripts/bench/sandbox.ts [--rounds 15] [--compare <other tree's bin/cridock.js>]
 * (needs scripts/env/setup.sh; CRIDOCK_TEST_DOCKER_ENDPOINT picks the engine). --compare adds a second cridock, e.g. the
 * main branch checked out elsewhere, measured in the same rounds.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { spawnSync } from "node:child_process";
import { DECODE_OPTIONS, criRoot } from "../../src/cri/proto.ts";
import { sandboxSpecFromCri } from "../../src/cri/sandbox-rpcs.ts";
import type { RunPodSandboxRequest } from "../../src/cri/proto-types.ts";
import { DockerClient } from "../../src/docker/client.ts";
import { sandboxCreateBody } from "../../src/runtime/sandbox/docker.ts";
import { silentLogger } from "../../src/log.ts";
import { findPlugin, loadNetworkConfig } from "../../src/network/conf.ts";
import { execPlugin, pluginEnv, pluginStdin, podCniArgs } from "../../src/network/invoke.ts";
import { startCridockProcess, type CridockProcess } from "../../test/helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, makeCniConfDir } from "../../test/helpers/env.ts";
import { median, spawnedPerOperation, stepBreakdown } from "./lib/stats.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "15" }, compare: { type: "string" } } });
const rounds = Number(values.rounds);
const cni = await makeCniConfDir({ bridge: "cridock-bench0", subnet: "10.92.0.0/24", networkName: "cridock-bench" });
const scratch = await mkdtemp(join(tmpdir(), "cridock-bench-"));
const DOCKER_ENDPOINT = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock";
const docker = new DockerClient({ endpoint: DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
const { config: list } = await loadNetworkConfig(cni.dir, [CNI_BIN_DIR]);
if (!list) throw new Error("the bench CNI config did not load");
const binaries = new Map<string, string>();
for (const plugin of list.plugins) binaries.set(plugin.type, (await findPlugin(plugin.type, [CNI_BIN_DIR]))!);

function flags(cache: string, level = "info"): string[] {
  return [`--docker-endpoint=${DOCKER_ENDPOINT}`, `--pod-infra-container-image=${PAUSE_IMAGE}`, "--network-plugin=cni", `--cni-conf-dir=${cni.dir}`, `--cni-bin-dir=${CNI_BIN_DIR}`, `--cni-cache-dir=${join(scratch, cache)}`, `--log-level=${level}`];
}

const podConfig = (tag: string, i: number) => ({ metadata: { name: `bench-${tag}-${i}`, namespace: "bench", uid: `bench-${tag}-uid-${i}`, attempt: 0 }, linux: {} });
const cgroupDriver = (await docker.info()).CgroupDriver === "systemd" ? "systemd" : "cgroupfs";
const requestType = criRoot().lookupType("runtime.v1.RunPodSandboxRequest");

async function cycle(cridock: CridockProcess, tag: string, i: number): Promise<void> {
  const config = podConfig(tag, i);
  const { podSandboxId } = await cridock.client.call("RunPodSandbox", { config });
  await cridock.client.call("StopPodSandbox", { podSandboxId });
  await cridock.client.call("RemovePodSandbox", { podSandboxId });
}

/** The floor: what any dockershim has to do for one cycle. */
async function floor(i: number): Promise<void> {
  // The same pause container cridock creates (decoded the way cridock decodes the request).
  const request = requestType.toObject(requestType.fromObject({ config: podConfig("floor", i) }), DECODE_OPTIONS) as RunPodSandboxRequest;
  const body = await sandboxCreateBody(sandboxSpecFromCri(request), {
    image: PAUSE_IMAGE,
    cgroupDriver,
    networkKind: "cni",
    rootDirectory: join(scratch, "floor"),
    logMaxSize: "50m",
    logMaxFile: 4,
  });
  const { Id: id } = await docker.createContainer(`bench-floor-${i}`, body);
  await docker.startContainer(id);
  const pid = (await docker.inspectContainer(id)).State.Pid;
  const base = { containerId: id, netnsPath: `/proc/${pid}/ns/net`, ifName: "eth0", args: podCniArgs({ name: `f${i}`, namespace: "bench", uid: `u${i}` }, id), binDirs: [CNI_BIN_DIR] };
  let prev: unknown;
  for (const plugin of list!.plugins) {
    const out = await execPlugin(plugin.type, { binary: binaries.get(plugin.type)!, env: pluginEnv("ADD", base), stdin: JSON.stringify(pluginStdin(list!, plugin, {}, prev)), timeoutMs: 60_000 });
    prev = JSON.parse(out);
  }
  for (const plugin of [...list!.plugins].reverse()) {
    await execPlugin(plugin.type, { binary: binaries.get(plugin.type)!, env: pluginEnv("DEL", base), stdin: JSON.stringify(pluginStdin(list!, plugin, {}, prev)), timeoutMs: 60_000 });
  }
  await docker.stopContainer(id, 10);
  await docker.removeContainer(id, { force: true });
}

const arms: { name: string; run: (i: number) => Promise<void>; times: number[] }[] = [];
const started: CridockProcess[] = [];
try {
  const self = await startCridockProcess({ flags: flags("cache-self") });
  started.push(self);
  arms.push({ name: "cridock", run: (i) => cycle(self, "self", i), times: [] });
  if (values.compare) {
    const other = await startCridockProcess({ entry: values.compare, flags: flags("cache-other") });
    started.push(other);
    arms.push({ name: `compare (${values.compare})`, run: (i) => cycle(other, "other", i), times: [] });
  }
  arms.push({ name: "floor", run: floor, times: [] });
  for (const arm of arms) await arm.run(-1); // warm-up: image checks, connections, page cache
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < arms.length; k++) {
      const arm = arms[(i + k) % arms.length]!;
      const t0 = performance.now();
      await arm.run(i);
      arm.times.push(performance.now() - t0);
    }
  }
  const floorMedian = median(arms.at(-1)!.times);
  console.log(`sandbox Run+Stop+Remove cycle, ${rounds} interleaved rounds (medians):`);
  for (const arm of arms) {
    const m = median(arm.times);
    console.log(`  ${arm.name.padEnd(12)} ${m.toFixed(1)} ms  ${(m / floorMedian).toFixed(3)} x floor`);
  }
  // Processes per cycle: cridock's step timer (debug level, a separate instance), the floor's plugin execs.
  const counter = await startCridockProcess({ flags: flags("cache-count", "debug") });
  started.push(counter);
  await cycle(counter, "count", -2); // warm-up
  const before = counter.logs().length;
  for (let i = 0; i < 5; i++) await cycle(counter, "count", i);
  const log = counter.logs().slice(before);
  const spawned = spawnedPerOperation(log);
  const perCycle = Object.values(spawned).reduce((a, b) => a + b, 0) / 5;
  console.log(`  processes spawned per cycle: cridock ${perCycle} (${JSON.stringify(spawned)} over 5 cycles), floor ${2 * list.plugins.length} (${list.plugins.length} plugins ADD + DEL)`);
  recordResult("sandbox", {
    command: commandLine("scripts/bench/sandbox.ts"),
    columns: ["arm", "cycle, median (ms)", "× floor"],
    rows: [...arms.map((arm) => [arm.name, median(arm.times).toFixed(1), (median(arm.times) / floorMedian).toFixed(3)]), ["processes spawned per cycle: cridock / floor", String(perCycle), String(2 * list.plugins.length)]],
    note: `Run+Stop+Remove cycle, ${rounds} interleaved rounds; the floor is the same pause container's create, start and inspect with one ADD, and one DEL, stop and remove.`,
  });
  console.log("  cridock step breakdown (medians over 5 cycles at debug level, ms):");
  for (const [op, b] of Object.entries(stepBreakdown(log))) console.log(`    ${op}: total ${b.totalMs}, spawned ${b.spawned}, ${JSON.stringify(b.steps)}`);
} finally {
  for (const c of started) await c.stop();
  await docker.close();
  await cni.cleanup();
  // The bridge the plugin made for this benchmark's network goes too.
  spawnSync("ip", ["link", "delete", "cridock-bench0"], { stdio: "ignore" });
  await rm(scratch, { recursive: true, force: true });
}
