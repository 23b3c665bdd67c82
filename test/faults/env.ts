/**
 * The fault suite's environment: a cridock child process on a CNI network,
 * bridge, subnet, result cache and root directory of its own (not the
 * integration tests' cridock-t0/10.89 or cridock-sb0/10.91), against the
 * engine CRIDOCK_TEST_DOCKER_ENDPOINT names; restarts after kill -9 on the
 * same socket and state; and the leak check each test runs after each
 * iteration: containers, IPs, veths, netns handles and mounts, checkpoints,
 * CNI cache files (temporaries too), log-writer state.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess, type CridockProcess } from "../helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, makeCniConfDir, type CniConfDir } from "../helpers/env.ts";

export const DOCKER_ENDPOINT = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT ?? "unix:///var/run/docker.sock";
export const FAULT_BRIDGE = "cridock-f0";
export const FAULT_SUBNET = "10.94.0.0/24";
export const FAULT_NETWORK = "cridock-faults";
/** Label every pod and container of the suite carries (leak checks look for it). */
export const FAULT_LABEL = "cridock.test.faults";

export interface FaultEnv {
  cridock: CridockProcess;
  cni: CniConfDir;
  scratch: string;
  cacheDir: string;
  rootDirectory: string;
  logDir: string;
  /** kill -9 and start again on the same socket, root and cache. */
  killAndRestart(pauseMs?: number): Promise<CridockProcess>;
  close(): Promise<void>;
}

export interface FaultEnvOptions {
  extraFlags?: string[];
  /** Directories searched before the CNI plugins (fault-injection plugins). */
  extraBinDir?: string;
  /** Plugins appended to the network's list. */
  extraPlugins?: Record<string, unknown>[];
}

export function docker(...args: string[]): string {
  return execFileSync("docker", ["-H", DOCKER_ENDPOINT, ...args], { encoding: "utf8", timeout: 60_000 }).trim();
}

/**
 * Removes the suite's containers that an earlier run, killed in the middle
 * (a CI time-out, tap's own per-file time-out), left in the engine: every
 * leak check after would count them against a test that did not make them.
 * The files run one at a time and each removes its pods when it ends, so at
 * a file's start any such container is a leftover. Said on stderr.
 */
function removeLeftovers(): void {
  const stale = docker("ps", "-aq", "--filter", `label=${FAULT_LABEL}`).split("\n").filter(Boolean);
  if (stale.length === 0) return;
  console.error(`# removing ${stale.length} container(s) of the fault suite that a killed run left: ${stale.join(" ")}`);
  docker("rm", "-f", ...stale);
}

export async function startFaultEnv(options: FaultEnvOptions = {}): Promise<FaultEnv> {
  removeLeftovers();
  const cni = await makeCniConfDir({ bridge: FAULT_BRIDGE, subnet: FAULT_SUBNET, networkName: FAULT_NETWORK });
  if (options.extraPlugins?.length) {
    const file = join(cni.dir, `10-${FAULT_NETWORK}.conflist`);
    const list = JSON.parse(await readFile(file, "utf8")) as { plugins: Record<string, unknown>[] };
    list.plugins.push(...options.extraPlugins);
    await writeFile(file, JSON.stringify(list, null, 2) + "\n");
  }
  const scratch = await mkdtemp(join(tmpdir(), "cridock-faults-"));
  const cacheDir = join(scratch, "cni-cache");
  const rootDirectory = join(scratch, "root");
  const socketPath = join(scratch, "cri.sock");
  const flags = [
    `--docker-endpoint=${DOCKER_ENDPOINT}`,
    `--pod-infra-container-image=${PAUSE_IMAGE}`,
    "--network-plugin=cni",
    `--cni-conf-dir=${cni.dir}`,
    `--cni-bin-dir=${[options.extraBinDir, CNI_BIN_DIR].filter(Boolean).join(",")}`,
    `--cni-cache-dir=${cacheDir}`,
    ...(options.extraFlags ?? []),
  ];
  const start = () => startCridockProcess({ flags, socketPath, rootDirectory, startTimeoutMs: 60_000 });
  const env: FaultEnv = {
    cridock: await start(),
    cni,
    scratch,
    cacheDir,
    rootDirectory,
    logDir: join(scratch, "pod-logs"),
    async killAndRestart(pauseMs = 0) {
      await env.cridock.kill();
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
      env.cridock = await start();
      return env.cridock;
    },
    async close() {
      await removeAllPods(env).catch(() => undefined);
      await env.cridock.stop();
      await cni.cleanup();
      await rm(scratch, { recursive: true, force: true });
      // The suite's own bridge (test files run one at a time): gone with the last pod.
      try {
        execFileSync("ip", ["link", "del", FAULT_BRIDGE], { stdio: "ignore" });
      } catch {
        // not there (no pod ever ran)
      }
    },
  };
  return env;
}

let counter = 0;

export function podConfig(env: FaultEnv, name = `f${process.pid}-${++counter}`): Record<string, unknown> {
  return {
    metadata: { name, namespace: "cridock-faults", uid: `uid-${name}`, attempt: 0 },
    labels: { [FAULT_LABEL]: "1" },
    logDirectory: join(env.logDir, name),
    linux: {},
  };
}

/** Removes every sandbox cridock lists (and so their containers), as kubelet would. */
export async function removeAllPods(env: FaultEnv): Promise<number> {
  const client = env.cridock.client;
  const { items } = await client.call("ListPodSandbox", {});
  for (const s of items as { id: string }[]) {
    await client.call("StopPodSandbox", { podSandboxId: s.id });
    await client.call("RemovePodSandbox", { podSandboxId: s.id });
  }
  return items.length;
}

async function listOrEmpty(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => [] as string[]);
}

/** What is left of the suite's pods; every list should be empty. */
export async function leaks(env: FaultEnv): Promise<Record<string, string[]>> {
  const root = env.rootDirectory;
  const out: Record<string, string[]> = {};
  const split = (s: string) => s.split("\n").filter(Boolean);
  out.containers = split(docker("ps", "-aq", "--filter", `label=io.cridock.root=${root}`));
  out.workloads = split(docker("ps", "-aq", "--filter", `label=${FAULT_LABEL}`));
  out.mounts = (await readFile("/proc/self/mountinfo", "utf8")).split("\n").filter((l) => l.includes(root));
  out.netnsHandles = await listOrEmpty(join(root, "netns"));
  out.checkpoints = await listOrEmpty(join(root, "sandbox"));
  out.logState = await listOrEmpty(join(root, "logs"));
  out.cniCache = await listOrEmpty(join(env.cacheDir, "results"));
  out.ips = (await listOrEmpty(join(env.cni.ipamDataDir, FAULT_NETWORK))).filter((f) => !f.startsWith("last_reserved_ip") && f !== "lock");
  try {
    out.veths = split(execFileSync("ip", ["-o", "link", "show", "master", FAULT_BRIDGE], { encoding: "utf8" }));
  } catch {
    out.veths = [];
  }
  return out;
}

/** The number of leaked items across all kinds. */
export function leakCount(found: Record<string, string[]>): number {
  return Object.values(found).reduce((n, list) => n + list.length, 0);
}
