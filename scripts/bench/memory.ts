/**
 * Benchmark: cridock's resident memory (VmRSS, VmHWM, the peak, and the
 * anonymous part, its own heap and buffers) idle
 * after start and with N pause-only pods (CNI networking), for each way of
 * running it: the prebuilt bundle (dist/cridock.js, `npm run build` first),
 * the sources through tsx, and optionally another tree's bin/cridock.js.
 * Each is a fresh process on its own socket and root; the pods are removed
 * afterwards.
 *
 *   tsx scripts/bench/memory.ts [--pods 100] [--idle-seconds 5] [--compare <bin/cridock.js>] [--without-tsx]
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { spawnSync } from "node:child_process";
import { startCridockProcess, type CridockProcessOptions } from "../../test/helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, makeCniConfDir } from "../../test/helpers/env.ts";
import { residentSplit } from "./lib/proc-usage.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "100" },
    "idle-seconds": { type: "string", default: "5" },
    compare: { type: "string" },
    "without-tsx": { type: "boolean", default: false },
  },
});
const pods = Number(values.pods);
const idleMs = Number(values["idle-seconds"]) * 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * VmRSS and its peak, and from smaps_rollup the process's private anonymous
 * memory: RSS also counts the pages of the node executable it has touched
 * (about half of an idle cridock's RSS), which every node process on the
 * host shares.
 */
async function memory(pid: number): Promise<{ rss: number; hwm: number; anon: number }> {
  const [status, split] = await Promise.all([readFile(`/proc/${pid}/status`, "utf8"), residentSplit(pid)]);
  const kb = (field: string) => Number(/(\d+) kB/.exec(status.split("\n").find((l) => l.startsWith(field)) ?? "")?.[1] ?? NaN);
  return { rss: kb("VmRSS:") / 1024, hwm: kb("VmHWM:") / 1024, anon: split.anonymous };
}

const cni = await makeCniConfDir({ bridge: "cridock-mem0", subnet: "10.93.0.0/22", networkName: "cridock-mem" });
const arms: { name: string; options: CridockProcessOptions }[] = [
  { name: "bundle (dist/cridock.js)", options: {} },
  ...(values["without-tsx"] ? [] : [{ name: "sources through tsx", options: { env: { CRIDOCK_FROM_SOURCE: "1" } } }]),
  ...(values.compare ? [{ name: `compare (${values.compare})`, options: { entry: values.compare } }] : []),
];
const record: (string | number)[][] = [];
try {
  for (const arm of arms) {
    const cridock = await startCridockProcess({
      ...arm.options,
      flags: [`--docker-endpoint=${process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock"}`, `--pod-infra-container-image=${PAUSE_IMAGE}`, "--network-plugin=cni", `--cni-conf-dir=${cni.dir}`, `--cni-bin-dir=${CNI_BIN_DIR}`, `--cni-cache-dir=${join(cni.dir, "cache")}`],
    });
    const ids: string[] = [];
    try {
      await cridock.client.call("Version", {});
      await sleep(idleMs);
      const idle = await memory(cridock.child.pid!);
      for (let i = 0; i < pods; i++) {
        const config = { metadata: { name: `mem-${i}`, namespace: "bench-mem", uid: `mem-${process.pid}-${i}`, attempt: 0 }, linux: {} };
        ids.push((await cridock.client.call("RunPodSandbox", { config })).podSandboxId);
      }
      // What kubelet does meanwhile: relist and ask each pod's status.
      for (let round = 0; round < 3; round++) {
        await cridock.client.call("ListPodSandbox", {});
        for (const podSandboxId of ids) await cridock.client.call("PodSandboxStatus", { podSandboxId });
      }
      await sleep(idleMs);
      const loaded = await memory(cridock.child.pid!);
      console.log(
        `${arm.name}: idle RSS ${idle.rss.toFixed(1)} MB (anonymous ${idle.anon.toFixed(1)}, peak RSS ${idle.hwm.toFixed(1)}); ` +
          `with ${pods} pods RSS ${loaded.rss.toFixed(1)} MB (anonymous ${loaded.anon.toFixed(1)}, peak RSS ${loaded.hwm.toFixed(1)})`,
      );
      record.push([arm.name, `${idle.rss.toFixed(1)} MB`, `${loaded.rss.toFixed(1)} MB`, `${idle.anon.toFixed(1)} / ${loaded.anon.toFixed(1)} MB`]);
    } finally {
      for (const podSandboxId of ids) {
        await cridock.client.call("StopPodSandbox", { podSandboxId }).catch(() => undefined);
        await cridock.client.call("RemovePodSandbox", { podSandboxId }).catch(() => undefined);
      }
      await cridock.stop();
    }
  }
  recordResult("memory", { command: commandLine("scripts/bench/memory.ts"), columns: ["way", "RSS idle", `RSS with ${pods} pods`, `anonymous idle / with ${pods} pods`], rows: record });
} finally {
  await cni.cleanup();
  // The bridge the plugin made for this benchmark's network goes too.
  spawnSync("ip", ["link", "delete", "cridock-mem0"], { stdio: "ignore" });
}
