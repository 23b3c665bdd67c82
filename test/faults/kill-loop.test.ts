/**
 * kill -9 at random moments while full pod lifecycles run back to back
 * (RunPodSandbox, CreateContainer, StartContainer, ExecSync, status, stops
 * and removes), and aimed at the middle of CNI ADD and CNI DEL (a plugin at
 * the end of the chain that blocks while armed). After each kill cridock is
 * restarted, the pods it lists are stopped and removed as kubelet would, and
 * nothing may be left: containers, IPs, veths, netns handles, checkpoints,
 * CNI cache files, log-writer state.
 */
import t, { type Test } from "tap";
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";
import { FAULT_LABEL, leakCount, leaks, podConfig, removeAllPods, startFaultEnv, type FaultEnv } from "./env.ts";

const RANDOM_KILLS = Number(process.env.CRIDOCK_FAULT_RANDOM_KILLS ?? 20);
const AIMED_KILLS = Number(process.env.CRIDOCK_FAULT_AIMED_KILLS ?? 4);

// A CNI plugin that, while `<dir>/armed-<COMMAND>` exists, says it is running
// (`<dir>/in-<COMMAND>`) and then takes 3 s; otherwise it passes the result on.
const KILLPOINT = `#!${process.execPath}
const fs = require("fs");
let input = "";
process.stdin.on("data", (d) => (input += d)).on("end", () => {
  const conf = JSON.parse(input);
  const cmd = process.env.CNI_COMMAND;
  if (cmd === "VERSION") {
    process.stdout.write(JSON.stringify({ cniVersion: conf.cniVersion, supportedVersions: ["0.3.1", "0.4.0", "1.0.0"] }));
    return;
  }
  const armed = fs.existsSync(conf.dir + "/armed-" + cmd);
  if (armed) fs.writeFileSync(conf.dir + "/in-" + cmd, process.env.CNI_CONTAINERID || "");
  setTimeout(() => {
    if (cmd === "ADD") process.stdout.write(JSON.stringify(conf.prevResult || { cniVersion: conf.cniVersion }));
  }, armed ? 3000 : 0);
});
`;

const pluginDir = await mkdtemp(join(tmpdir(), "cridock-killpoint-"));
const markerDir = join(pluginDir, "markers");
await writeFile(join(pluginDir, "killpoint"), KILLPOINT);
await chmod(join(pluginDir, "killpoint"), 0o755);
await mkdir(markerDir);

const env = await startFaultEnv({ extraBinDir: pluginDir, extraPlugins: [{ type: "killpoint", dir: markerDir }] });
t.teardown(async () => {
  await env.close();
  await rm(pluginDir, { recursive: true, force: true });
});
await env.cridock.client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });

let completed = 0;

/** One full pod lifecycle. */
async function lifecycle(env: FaultEnv): Promise<void> {
  const client = env.cridock.client;
  const config = podConfig(env);
  const { podSandboxId } = await client.call("RunPodSandbox", { config });
  const { containerId } = await client.call("CreateContainer", {
    podSandboxId,
    config: { metadata: { name: "app", attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sh", "-c", "echo started; sleep 600"], logPath: "app.log", labels: { [FAULT_LABEL]: "1" } },
    sandboxConfig: config,
  });
  await client.call("StartContainer", { containerId });
  const exec = await client.call("ExecSync", { containerId, cmd: ["echo", "hello"], timeout: 10n });
  if (exec.stdout.toString() !== "hello\n") throw new Error(`ExecSync answered ${JSON.stringify(exec.stdout.toString())}`);
  await client.call("ContainerStatus", { containerId });
  await client.call("StopContainer", { containerId, timeout: 0n });
  await client.call("RemoveContainer", { containerId });
  await client.call("StopPodSandbox", { podSandboxId });
  await client.call("RemovePodSandbox", { podSandboxId });
  completed++;
}

/** Lifecycles back to back until cridock is killed; a failure before that is a finding. */
async function drive(env: FaultEnv, stop: { stopped: boolean; error?: unknown }): Promise<void> {
  try {
    while (!stop.stopped) await lifecycle(env);
  } catch (err) {
    if (!stop.stopped) stop.error = err;
  }
}

async function until(predicate: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

async function recoverAndCheck(t: Test, what: string): Promise<void> {
  await removeAllPods(env);
  const found = await leaks(env);
  if (leakCount(found) > 0) t.fail(`${what}: leaked ${JSON.stringify(found)}`);
  else t.pass(`${what}: nothing leaked`);
}

async function waitFor(path: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await stat(path).then(() => true, () => false)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

t.test(`${RANDOM_KILLS} kills at random moments of back-to-back pod lifecycles`, async (t) => {
  for (let i = 0; i < RANDOM_KILLS; i++) {
    const stop: { stopped: boolean; error?: unknown } = { stopped: false };
    const driving = drive(env, stop);
    // One or two whole lifecycles, then a kill at a random moment of the next.
    const target = completed + 1 + (i % 2);
    await until(() => completed >= target || stop.error !== undefined, 120_000);
    await new Promise((r) => setTimeout(r, Math.random() * 2000));
    stop.stopped = true;
    await env.killAndRestart();
    await driving;
    if (stop.error) t.fail(`a lifecycle failed before the kill: ${(stop.error as Error).message}`);
    await recoverAndCheck(t, `random kill ${i + 1}`);
  }
  t.comment(`completed pod lifecycles: ${completed}`);
  t.ok(completed >= 30, `at least 30 full pod lifecycles ran between the kills (${completed})`);
});

for (const command of ["ADD", "DEL"] as const) {
  t.test(`${AIMED_KILLS} kills in the middle of CNI ${command}`, async (t) => {
    for (let i = 0; i < AIMED_KILLS; i++) {
      const client = env.cridock.client;
      await rm(join(markerDir, `in-${command}`), { force: true });
      let podSandboxId = "";
      if (command === "DEL") podSandboxId = (await client.call("RunPodSandbox", { config: podConfig(env) })).podSandboxId;
      await writeFile(join(markerDir, `armed-${command}`), "");
      const call = command === "ADD" ? client.call("RunPodSandbox", { config: podConfig(env) }) : client.call("StopPodSandbox", { podSandboxId });
      call.catch(() => undefined);
      t.ok(await waitFor(join(markerDir, `in-${command}`), 30_000), `kill ${i + 1} lands inside CNI ${command}`);
      await new Promise((r) => setTimeout(r, Math.random() * 1000));
      await rm(join(markerDir, `armed-${command}`), { force: true });
      await env.killAndRestart();
      await recoverAndCheck(t, `kill ${i + 1} in CNI ${command}`);
    }
  });
}

t.test("cridock serves after all the kills", async (t) => {
  const version = await env.cridock.client.call("Version", {});
  t.equal(version.version, "0.1.0");
});
