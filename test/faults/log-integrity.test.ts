/**
 * CRI logs across kill -9 restarts: a fast writer (bursts of 100,000
 * numbered lines as fast as the shell prints them, enough for Docker to
 * rotate its json-file log several times) and a slow steady writer (about
 * 100 lines/s, writing the whole time), with cridock killed -9 and
 * restarted at random moments, at least 10 times. Afterwards every number
 * is in the CRI file exactly once, in order, every line a valid CRI record.
 *
 * Docker keeps max-size × (max-file − 1) of output that cridock has not read
 * yet (see README, Container logs); the sizes here leave room for the
 * output of the longest restart, so any loss or repeat is cridock's.
 */
import t from "tap";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { parseRecord } from "../../src/logs/crilog.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";
import { docker, FAULT_LABEL, leakCount, leaks, podConfig, removeAllPods, startFaultEnv } from "./env.ts";

const KILLS = Number(process.env.CRIDOCK_FAULT_LOG_KILLS ?? 12);
const BURSTS = 5;
const BURST = 100_000;
const FAST_LINES = BURSTS * BURST;
const SLOW_LINES = 4000;

const env = await startFaultEnv({ extraFlags: ["--docker-log-max-size=10m", "--docker-log-max-file=4"] });
t.teardown(() => env.close());

/** The numbers in a CRI file; counts records that are not valid CRI. */
function numbersIn(text: string): { numbers: number[]; invalid: number } {
  const numbers: number[] = [];
  let invalid = 0;
  let partial = "";
  for (const line of text.split("\n").slice(0, -1)) {
    const r = parseRecord(line);
    if (!r || (r.tag !== "P" && r.tag !== "F") || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/.test(r.timestamp)) {
      invalid++;
      continue;
    }
    partial += r.content;
    if (r.tag === "F") {
      numbers.push(Number(partial));
      partial = "";
    }
  }
  if (!text.endsWith("\n") && text.length > 0) invalid++;
  return { numbers, invalid };
}

/** Lines missing and lines written more than once or out of order, against 1..n. */
function audit(numbers: number[], n: number): { lost: number; replayed: number; outOfOrder: number } {
  const seen = new Uint8Array(n + 1);
  let replayed = 0;
  let outOfOrder = 0;
  let last = 0;
  for (const x of numbers) {
    if (!Number.isInteger(x) || x < 1 || x > n || seen[x]) replayed++;
    else seen[x] = 1;
    if (x <= last) outOfOrder++;
    last = x;
  }
  let lost = 0;
  for (let i = 1; i <= n; i++) if (!seen[i]) lost++;
  return { lost, replayed, outOfOrder };
}

t.test(`fast rotating writer and slow steady writer through ${KILLS} kill -9 restarts`, async (t) => {
  await env.cridock.client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const config = podConfig(env, `logs-${process.pid}`);
  const { podSandboxId } = await env.cridock.client.call("RunPodSandbox", { config });
  const commands = {
    fast: `for b in $(seq 0 ${BURSTS - 1}); do seq $((b*${BURST}+1)) $((b*${BURST}+${BURST})); sleep 3; done`,
    slow: `i=0; while [ $i -lt ${SLOW_LINES} ]; do i=$((i+1)); echo $i; usleep 10000; done`,
  };
  const ids: Record<string, string> = {};
  for (const [name, script] of Object.entries(commands)) {
    const { containerId } = await env.cridock.client.call("CreateContainer", {
      podSandboxId,
      config: { metadata: { name, attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sh", "-c", script], logPath: `${name}.log`, labels: { [FAULT_LABEL]: "1" } },
      sandboxConfig: config,
    });
    ids[name] = containerId;
  }
  for (const id of Object.values(ids)) await env.cridock.client.call("StartContainer", { containerId: id });

  for (let i = 0; i < KILLS; i++) {
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 2500));
    await env.killAndRestart(Math.random() * 1000);
  }
  // Both containers end; their writers then finish the files.
  const deadline = Date.now() + 180_000;
  for (const id of Object.values(ids)) {
    while ((await env.cridock.client.call("ContainerStatus", { containerId: id })).status.state !== 2) {
      if (Date.now() > deadline) throw new Error(`container ${id} did not exit in time`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const rotated = (await readdir(join(docker("inspect", "-f", "{{.LogPath}}", ids.fast!), ".."))).filter((f) => /-json\.log\.\d+$/.test(f));
  t.ok(rotated.length >= 2, `Docker rotated the fast writer's log (${rotated.length} rotated files kept)`);

  for (const [name, n] of [["fast", FAST_LINES], ["slow", SLOW_LINES]] as const) {
    const text = await readFile(join(config.logDirectory as string, `${name}.log`), "utf8");
    const { numbers, invalid } = numbersIn(text);
    const result = audit(numbers, n);
    t.comment(`${name} writer: ${n} lines written, ${numbers.length} in the CRI file; lost ${result.lost}, replayed ${result.replayed}, out of order ${result.outOfOrder}, invalid records ${invalid}`);
    t.equal(invalid, 0, `${name}: every record is valid CRI`);
    t.equal(result.lost, 0, `${name}: no line lost`);
    t.equal(result.replayed, 0, `${name}: no line written twice`);
    t.equal(result.outOfOrder, 0, `${name}: in order`);
  }
  await removeAllPods(env);
  t.equal(leakCount(await leaks(env)), 0, "nothing leaked");
});
