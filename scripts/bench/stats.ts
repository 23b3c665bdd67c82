/**
 * Benchmark: ListContainerStats through cridock against what a Docker-stats
 * based shim does for the same answer (one `GET /containers/{id}/stats?
 * stream=false&one-shot=true` per container, as cri-dockerd does), in one run.
 * Prints the median latency of each, their ratio, and the CPU time dockerd
 * itself spent per round — the load kubelet's stats scrapes put on dockerd.
 *
 *   npx tsx scripts/bench/stats.ts [--containers 50] [--rounds 15] [--image REF]
 */
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { DockerClient } from "../../src/docker/client.ts";
import { silentLogger } from "../../src/log.ts";
import { SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL } from "../../src/runtime/labels.ts";
import { startCridockProcess } from "../../test/helpers/cridock-process.ts";
import { BUSYBOX_IMAGE, TEST_DOCKER_ENDPOINT } from "../../test/helpers/env.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const { values } = parseArgs({
  options: {
    containers: { type: "string", default: "50" },
    rounds: { type: "string", default: "15" },
    image: { type: "string", default: BUSYBOX_IMAGE },
  },
});
const COUNT = Number(values.containers);
const ROUNDS = Number(values.rounds);
const BENCH_LABEL = "cridock-bench-stats";

// The engine cridock runs on (CRIDOCK_TEST_DOCKER_ENDPOINT), so cridock lists the containers made here.
const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 120_000, logger: silentLogger });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** The dockerd serving TEST_DOCKER_ENDPOINT (several may run: the node's own and the test engines). */
function dockerdPid(): string {
  const pids = execFileSync("pidof", ["dockerd"], { encoding: "utf8" }).trim().split(/\s+/);
  const hostOf = (pid: string) => {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const flag = args.findIndex((a) => a === "-H" || a === "--host" || a.startsWith("--host=") || a.startsWith("-H="));
    if (flag < 0) return "unix:///var/run/docker.sock";
    return args[flag]!.includes("=") ? args[flag]!.slice(args[flag]!.indexOf("=") + 1) : args[flag + 1]!;
  };
  const pid = pids.find((p) => hostOf(p) === TEST_DOCKER_ENDPOINT);
  if (!pid) throw new Error(`no dockerd process serves ${TEST_DOCKER_ENDPOINT}`);
  return pid;
}
const DOCKERD_PID = dockerdPid();

/** dockerd's user+system CPU time so far, in milliseconds. */
function dockerdCpuMs(): number {
  const pid = DOCKERD_PID;
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

async function timed(fn: () => Promise<unknown>): Promise<{ ms: number; dockerdMs: number }> {
  const cpu0 = dockerdCpuMs();
  const t0 = performance.now();
  await fn();
  return { ms: performance.now() - t0, dockerdMs: dockerdCpuMs() - cpu0 };
}

async function main() {
  await docker.inspectImage(values.image!).catch(() => {
    throw new Error(`image ${values.image} is not present; run scripts/env/setup.sh first`);
  });
  // Containers labelled as cridock labels its own, so ListContainerStats sees them.
  const ids: string[] = [];
  process.stdout.write(`creating ${COUNT} running containers... `);
  for (let i = 0; i < COUNT; i++) {
    const { Id } = await docker.createContainer(`cridock-bench-stats-${process.pid}-${i}`, {
      Image: values.image,
      Cmd: ["sleep", "3600"],
      Labels: { [TYPE_LABEL]: TYPE_CONTAINER, [SANDBOX_ID_LABEL]: "0".repeat(64), [BENCH_LABEL]: "1" },
      HostConfig: { NetworkMode: "none" },
    });
    ids.push(Id);
    await docker.startContainer(Id);
  }
  console.log("done");
  const cridock = await startCridockProcess({ flags: ["--network-plugin=no-op", "--log-level=warn"] });
  try {
    const filter = { filter: { labelSelector: { [BENCH_LABEL]: "1" } } };
    // Warm-up: cridock inspects each container once and caches its pid.
    const warm = await cridock.client.call("ListContainerStats", filter);
    if (warm.stats.length !== COUNT) throw new Error(`cridock listed ${warm.stats.length} of ${COUNT} containers`);

    const viaCridock: { ms: number; dockerdMs: number }[] = [];
    const direct: { ms: number; dockerdMs: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate so drift on the machine affects both sides alike.
      viaCridock.push(await timed(() => cridock.client.call("ListContainerStats", filter)));
      direct.push(
        await timed(async () => {
          const list = await docker.listContainers({ label: [`${BENCH_LABEL}=1`] });
          await Promise.all(
            list.map((c) => docker.json("GET", `/containers/${c.Id}/stats`, { query: { stream: false, "one-shot": true } })),
          );
        }),
      );
    }
    const cMs = median(viaCridock.map((r) => r.ms));
    const dMs = median(direct.map((r) => r.ms));
    const cCpu = median(viaCridock.map((r) => r.dockerdMs));
    const dCpu = median(direct.map((r) => r.dockerdMs));
    console.log(`containers: ${COUNT}, rounds: ${ROUNDS}`);
    console.log(`ListContainerStats via cridock: median ${cMs.toFixed(1)} ms, dockerd CPU ${cCpu.toFixed(0)} ms per round`);
    console.log(`Docker stats one-shot per container: median ${dMs.toFixed(1)} ms, dockerd CPU ${dCpu.toFixed(0)} ms per round`);
    console.log(`latency ratio cridock/direct: ${(cMs / dMs).toFixed(2)}`);
    console.log(`dockerd CPU ratio cridock/direct: ${dCpu > 0 ? (cCpu / dCpu).toFixed(2) : "n/a"}`);
    recordResult("stats", {
      command: commandLine("scripts/bench/stats.ts"),
      columns: ["measure", "ListContainerStats via cridock", "Docker's one-shot stats per container", "ratio"],
      rows: [
        ["latency, median (ms)", cMs.toFixed(1), dMs.toFixed(1), (cMs / dMs).toFixed(2)],
        ["dockerd CPU per round (ms)", cCpu.toFixed(0), dCpu.toFixed(0), dCpu > 0 ? (cCpu / dCpu).toFixed(2) : "n/a"],
      ],
      note: `${COUNT} running containers, ${ROUNDS} alternating rounds.`,
    });
  } finally {
    await cridock.stop();
    await Promise.all(ids.map((id) => docker.removeContainer(id, { force: true }).catch(() => undefined)));
    await docker.close();
  }
}

await main();
