/**
 * Container benchmarks: cridock's CRI calls against the same Docker calls
 * issued directly, in one run, printing median ratios.
 *   cycle   Create/Start/Stop(0)/Remove       target ratio ≤ 1.15
 *   list    ListContainers and ListPodSandbox (answered from the list snapshot) with N running
 *           containers, for each N of --list, against the raw Docker list of the same
 *           containers; target ratio ≤ 1.0
 *   logs    one container writing numbered lines flat out: MB/s into the CRI file (target ≥ 50),
 *           cridock's CPU, every number exactly once; then the reader alone catching up on the
 *           same Docker log (the rate at which cridock drains a backlog)
 * Usage: tsx scripts/bench/containers.ts [--cycles 20] [--list 40,300] [--log-mb 200] [--line-bytes 100] [--only logs]
 */
import { parseArgs } from "node:util";
import { mkdtemp, open, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonFileFollower } from "../../src/logs/file-follower.ts";
import { parseRecord } from "../../src/logs/crilog.ts";
import { FollowStateStore } from "../../src/logs/resume.ts";
import { createLogger } from "../../src/log.ts";
import { DockerClient } from "../../src/docker/client.ts";
import { BUSYBOX_IMAGE, TEST_DOCKER_ENDPOINT } from "../../test/helpers/env.ts";
import { containerConfig, createContainer, runPod, startHarness, status, waitExited } from "../../test/integration/containers/harness.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const { values } = parseArgs({
  options: {
    cycles: { type: "string", default: "20" },
    list: { type: "string", default: "40,300" },
    "log-mb": { type: "string", default: "200" },
    "line-bytes": { type: "string", default: "100" },
    only: { type: "string" },
  },
});
const cycles = Number(values.cycles);
const listCounts = values.list.split(",").map(Number).filter((n) => n > 0).sort((a, b) => a - b);
const logMb = Number(values["log-mb"]);
const lineBytes = Math.max(16, Number(values["line-bytes"]));
const run = (part: string) => !values.only || values.only === part;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = async (fn: () => Promise<unknown>) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

const h = await startHarness(["--log-level=warn"]);
// The engine cridock runs on (CRIDOCK_TEST_DOCKER_ENDPOINT): the raw lists must count the same containers.
const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 120_000, logger: createLogger("warn") });
// What the run measured, for the record (recordResult, once at the end).
const record: (string | number)[][] = [];
try {
  const pod = await runPod(h);
  const image = (await docker.inspectImage(BUSYBOX_IMAGE)).Id;
  let n = 0;
  if (run("cycle")) {
    const viaCri: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i < cycles; i++) {
      viaCri.push(await time(async () => {
        const id = await createContainer(h, pod, containerConfig(`bench-${++n}`, ["sleep", "3600"]));
        await h.client.call("StartContainer", { containerId: id });
        await h.client.call("StopContainer", { containerId: id, timeout: 0n });
        await h.client.call("RemoveContainer", { containerId: id });
      }));
      direct.push(await time(async () => {
        const { Id } = await docker.createContainer(`cridock-bench-direct-${process.pid}-${i}`, {
          Image: image, Cmd: ["sleep", "3600"], HostConfig: { NetworkMode: `container:${pod.podSandboxId}`, IpcMode: `container:${pod.podSandboxId}` },
        });
        await docker.startContainer(Id);
        await docker.stopContainer(Id, 0);
        await docker.removeContainer(Id, { force: true });
      }));
    }
    console.log(`cycle: cridock median ${median(viaCri).toFixed(1)} ms, docker ${median(direct).toFixed(1)} ms, ratio ${(median(viaCri) / median(direct)).toFixed(3)} (target ≤ 1.15)`);
    record.push(["Create/Start/Stop/Remove cycle", `${median(viaCri).toFixed(1)} ms`, `${median(direct).toFixed(1)} ms`, (median(viaCri) / median(direct)).toFixed(3)]);
  }
  if (run("list")) {
    const made: string[] = [];
    for (const count of listCounts) {
      while (made.length < count) {
        const id = await createContainer(h, pod, containerConfig(`list-${made.length}`, ["sleep", "3600"]));
        await h.client.call("StartContainer", { containerId: id });
        made.push(id);
      }
      // Interleaved rounds, alternating which side goes first.
      const sides: [string, () => Promise<unknown>][] = [
        ["ListContainers", () => h.client.call("ListContainers", {})],
        ["docker containers", () => docker.listContainers({ label: ["io.kubernetes.docker.type=container"] })],
        ["ListPodSandbox", () => h.client.call("ListPodSandbox", {})],
        ["docker sandboxes", () => docker.listContainers({ label: ["io.kubernetes.docker.type=podsandbox"] })],
        // Answered from memory: what one CRI call costs before any listing (the transport's floor).
        ["Version", () => h.client.call("Version", {})],
      ];
      const times = sides.map(() => [] as number[]);
      for (const [, fn] of sides) await fn(); // warm-up: the snapshot is built
      for (let i = 0; i < 40; i++) {
        for (let k = 0; k < sides.length; k++) {
          const j = i % 2 ? sides.length - 1 - k : k;
          times[j]!.push(await time(sides[j]![1]));
        }
      }
      const m = times.map(median);
      console.log(
        `list(${count} running): ListContainers ${m[0]!.toFixed(2)} ms vs docker ${m[1]!.toFixed(2)} ms = ${(m[0]! / m[1]!).toFixed(3)}; ` +
          `ListPodSandbox ${m[2]!.toFixed(2)} ms vs docker ${m[3]!.toFixed(2)} ms = ${(m[2]! / m[3]!).toFixed(3)} (target ≤ 1.0); ` +
          `a CRI Version call ${m[4]!.toFixed(2)} ms`,
      );
      record.push(
        [`ListContainers, ${count} running`, `${m[0]!.toFixed(2)} ms`, `${m[1]!.toFixed(2)} ms`, (m[0]! / m[1]!).toFixed(3)],
        [`ListPodSandbox, ${count} running`, `${m[2]!.toFixed(2)} ms`, `${m[3]!.toFixed(2)} ms`, (m[2]! / m[3]!).toFixed(3)],
      );
    }
    for (const id of made) await h.client.call("RemoveContainer", { containerId: id });
  }
  if (run("logs")) await benchLogs(pod);

  await h.client.call("StopPodSandbox", { podSandboxId: pod.podSandboxId });
  await h.client.call("RemovePodSandbox", { podSandboxId: pod.podSandboxId });
  if (record.length > 0) {
    recordResult("containers", { command: commandLine("scripts/bench/containers.ts"), columns: ["measure", "cridock", "Docker directly", "ratio"], rows: record });
  }
} finally {
  await docker.close();
  await h.close();
}

/** CPU seconds (user + system) a process has used, from /proc. */
async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Every record parses; joined lines are the numbers first…count, each once, in
 * order (first: 1, or 0 to start wherever the text starts).
 */
function checkNumbered(text: string, count: number, first = 1): string | undefined {
  let expect = first;
  let partial = "";
  let start = 0;
  for (;;) {
    const nl = text.indexOf("\n", start);
    if (nl < 0) break;
    const r = parseRecord(text.slice(start, nl));
    start = nl + 1;
    if (!r) return `not a CRI record near byte ${start}`;
    partial += r.content;
    if (r.tag !== "F") continue;
    const number = Number(partial.slice(0, partial.indexOf(" ")));
    partial = "";
    if (expect === 0) expect = number;
    if (number !== expect) return `expected line ${expect}, found ${number}`;
    expect++;
  }
  return expect - 1 === count ? undefined : `ended at line ${expect - 1} of ${count}`;
}

async function benchLogs(pod: Awaited<ReturnType<typeof runPod>>): Promise<void> {
  const pad = "x".repeat(lineBytes - 10);
  const lines = Math.floor((logMb * 1024 * 1024) / lineBytes);
  const pid = h.cridock.child.pid!;
  const cpu0 = await cpuSeconds(pid);
  const start = performance.now();
  // Numbered lines of `lineBytes` bytes (an 8-digit number, a space, padding).
  const script = `awk 'BEGIN { for (i = 1; i <= ${lines}; i++) printf "%08d ${pad}\\n", i }'`;
  const id = await createContainer(h, pod, containerConfig("flood", ["sh", "-c", script]));
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id, 600_000);
  const exited = performance.now();
  // The CRI file is complete once its last line is there.
  const last = `stdout F ${String(lines).padStart(8, "0")} `;
  let size = 0;
  for (;;) {
    size = (await stat(s.logPath)).size;
    const tail = Buffer.alloc(Math.min(size, lineBytes + 64));
    const f = await open(s.logPath, "r");
    await f.read(tail, 0, tail.length, size - tail.length);
    await f.close();
    if (tail.toString("latin1").includes(last)) break;
    if (performance.now() - exited > 120_000) throw new Error("the CRI log never got its last line");
    await new Promise((r) => setTimeout(r, 20));
  }
  const seconds = (performance.now() - start) / 1000;
  const cpu = (await cpuSeconds(pid)) - cpu0;
  const problem = checkNumbered(await readFile(s.logPath, "latin1"), lines);
  console.log(
    `logs: ${lines} lines of ${lineBytes} B (${logMb} MiB) → ${(size / 1e6).toFixed(1)} MB CRI file in ${seconds.toFixed(2)} s ` +
      `= ${(size / 1e6 / seconds).toFixed(1)} MB/s end to end (target ≥ 50; dockerd's json-file writing bounds it), ` +
      `last line ${((performance.now() - exited) / 1000).toFixed(2)} s after exit; cridock CPU ${cpu.toFixed(2)} s ` +
      `(${((cpu / seconds) * 100).toFixed(0)}% of one core, ${(size / 1e6 / cpu).toFixed(0)} MB per CPU-second); ` +
      (problem ? `LINES LOST OR REPEATED: ${problem}` : "every line exactly once"),
  );
  record.push([`logs: ${lineBytes}-byte lines into the CRI file${problem ? " (LINES LOST OR REPEATED)" : ""}`, `${(size / 1e6 / seconds).toFixed(1)} MB/s`, "–", "–"]);

  // The reader alone on the same Docker log (the container has exited): how
  // fast a backlog drains. Docker has rotated the start away by now, so the
  // lines run from the oldest it kept to the last.
  const dir = await mkdtemp(join(tmpdir(), "cridock-bench-logs-"));
  try {
    const follower = new JsonFileFollower({
      docker, store: new FollowStateStore(join(dir, "state")), logger: createLogger("warn"),
      containerId: s.id, logPath: join(dir, "0.log"), tty: false,
    });
    const cpuBefore = process.cpuUsage();
    const t0 = performance.now();
    await follower.startFresh();
    await follower.wait();
    const catchUp = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpuBefore);
    const out = (await stat(join(dir, "0.log"))).size;
    const again = checkNumbered(await readFile(join(dir, "0.log"), "latin1"), lines, 0);
    console.log(
      `logs catch-up: ${(out / 1e6).toFixed(1)} MB CRI file from Docker's log on disk in ${catchUp.toFixed(2)} s = ${(out / 1e6 / catchUp).toFixed(1)} MB/s ` +
        `(CPU ${((used.user + used.system) / 1e6).toFixed(2)} s); ${again ? `LINES LOST OR REPEATED: ${again}` : "every line exactly once"}`,
    );
    await follower.stop();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await h.client.call("RemoveContainer", { containerId: s.id });
}
