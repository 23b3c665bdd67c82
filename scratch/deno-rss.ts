import { readFile } from "node:fs/promises";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUSYBOX_IMAGE, makeCniConfDir } from "../test/helpers/env.ts";
import { startRuntime } from "../scripts/lib/runtimes.ts";

const runtime = (process.argv[2] ?? "deno") as "node" | "deno";
const withLogs = process.argv[3] !== "nolog";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function mem(pid: number) {
  const t = await readFile(`/proc/${pid}/smaps_rollup`, "utf8");
  const g = (k: string) => Number(t.match(new RegExp(`^${k}:\\s+(\\d+)`, "m"))![1]) / 1024;
  return `rss ${g("Rss").toFixed(1)} anon ${g("Anonymous").toFixed(1)} file ${(g("Rss") - g("Anonymous")).toFixed(1)}`;
}
const cni = await makeCniConfDir({ bridge: "cridock-drss0", subnet: "10.95.0.0/24", networkName: "cridock-drss" });
const logDir = await mkdtemp(join(tmpdir(), "drss-"));
const rt = await startRuntime({ kind: "cridock", runtime }, cni);
const c = rt.client;
try {
  await c.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  await sleep(8000);
  console.log(runtime, withLogs ? "logs" : "nolog", 0, await mem(rt.pid));
  const config = { metadata: { name: "drss", namespace: "drss", uid: `drss-${Date.now()}`, attempt: 0 }, logDirectory: logDir, linux: {} };
  const podSandboxId = (await c.call("RunPodSandbox", { config })).podSandboxId;
  await sleep(3000);
  console.log(runtime, withLogs ? "logs" : "nolog", "pod", await mem(rt.pid));
  let n = 0;
  for (const target of [10, 20, 40]) {
    for (; n < target; n++) {
      const { containerId } = await c.call("CreateContainer", {
        podSandboxId,
        config: { metadata: { name: `s${n}`, attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "3600"], ...(withLogs ? { logPath: `s${n}.log` } : {}) },
        sandboxConfig: config,
      });
      await c.call("StartContainer", { containerId });
    }
    await sleep(5000);
    console.log(runtime, withLogs ? "logs" : "nolog", n, await mem(rt.pid));
  }
  await c.call("StopPodSandbox", { podSandboxId });
  await c.call("RemovePodSandbox", { podSandboxId });
  await sleep(5000);
  console.log(runtime, withLogs ? "logs" : "nolog", "after-rm", await mem(rt.pid));
} finally {
  await rt.stop();
}
