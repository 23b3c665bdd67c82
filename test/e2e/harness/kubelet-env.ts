/**
 * The e2e environment: a real kubelet, standalone (static pods, no API
 * server), driving a cridock child process on a private dockerd.
 *
 * Everything is private to this environment and removed by destroy(): the
 * dockerd (its own data root, so kubelet's image garbage collection never
 * touches anyone else's images; test images come from the local registry),
 * the CNI network (bridge cridock-e2e0, 10.97.0.0/24), kubelet's root,
 * certificate, pod log and manifest directories, and cridock's root.
 * kubelet serves its API on 127.0.0.1 only, with anonymous access allowed,
 * on a port free when the environment starts (kept across kubelet restarts),
 * so it never meets a cluster's kubelet on 10250 or another environment.
 *
 * CRIDOCK_E2E_EVENTED_PLEG=1 turns kubelet's EventedPLEG gate on (scripts/test.sh
 * runs the suite in both modes). CRIDOCK_TEST_DOCKERD_BIN picks the engine.
 */
import { spawn, execFile, execFileSync, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { mkdir, mkdtemp, rm, writeFile, unlink, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request as httpsRequest } from "node:https";
import { startCridockProcess, type CridockProcess } from "../../helpers/cridock-process.ts";
import { startCriDockerdProcess } from "../../helpers/cri-dockerd-process.ts";
import { startContainerdProcess } from "../../helpers/containerd-process.ts";
import { privateDockerd, type PrivateDockerd } from "../../helpers/private-dockerd.ts";
import { CNI_BIN_DIR, KUBERNETES_BIN_DIR, PAUSE_IMAGE, makeCniConfDir, type CniConfDir } from "../../helpers/env.ts";
import { freePort, scrape, type Samples } from "../../helpers/metrics-scrape.ts";
import { unmountUnder } from "../../helpers/mounts.ts";

export const E2E_BRIDGE = "cridock-e2e0";
export const E2E_DOCKER_BRIDGE = "cridock-e2ed";
export const E2E_SUBNET = "10.97.0.0/24";
export const E2E_NETWORK = "cridock-e2e";
export const NODE_NAME = "cridock-e2e";
export const KUBELET_BIN = join(KUBERNETES_BIN_DIR, "kubelet");

export interface KubeletEnvOptions {
  evented?: boolean;
  /** Extra KubeletConfiguration fields. */
  config?: Record<string, unknown>;
  /** kubelet's API port; default: one free on 127.0.0.1 at start. */
  kubeletPort?: number;
  bridge?: string;
  dockerBridge?: string;
  subnet?: string;
  /** cridock log level. */
  cridockLogLevel?: string;
  /** Another tree's bin/cridock.js to run (the kubelet bench compares trees). */
  cridockEntry?: string;
  /** A self-contained executable of cridock to run (the kubelet bench compares executables). */
  cridockExecutable?: string;
  /** Run this tree's cridock on Deno (the kubelet bench's Deno arm). */
  cridockRuntime?: "node" | "deno";
  /** Serve cridock's /metrics (default true; off for trees that predate it). */
  metrics?: boolean;
  /** Run this cri-dockerd binary in cridock's place (the kubelet bench puts the two side by side). */
  criDockerd?: string;
  /** Run containerd 2.x's own CRI in cridock's place (the kubelet bench's floor of a node without Docker). */
  containerd?: { binDir: string; runcDir?: string };
  /** node's own flags for cridock (the kubelet bench's --cpu-prof and heap snapshots). */
  cridockNodeFlags?: string[];
  /** More environment for cridock (the kubelet bench's --cridock-env). */
  cridockEnv?: Record<string, string>;
}

export interface PodStatusView {
  phase?: string;
  podIP?: string;
  conditions?: { type: string; status: string }[];
  initContainerStatuses?: ContainerStatusView[];
  containerStatuses?: ContainerStatusView[];
}

export interface ContainerStatusView {
  name: string;
  ready: boolean;
  started?: boolean;
  restartCount: number;
  containerID?: string;
  state: { running?: { startedAt: string }; waiting?: { reason: string }; terminated?: { exitCode: number; reason: string; finishedAt: string } };
  lastState?: { terminated?: { exitCode: number } };
}

export interface PodView {
  metadata: { name: string; namespace: string; uid: string; deletionTimestamp?: string };
  spec: Record<string, unknown>;
  status: PodStatusView;
}

export class KubeletEnv {
  readonly evented: boolean;
  readonly scratch: string;
  readonly manifests: string;
  readonly podLogs: string;
  readonly kubeletRoot: string;
  readonly cridockRoot: string;
  readonly socketPath: string;
  readonly cniCache: string;
  cridock!: CridockProcess;
  dockerd!: PrivateDockerd;
  cni!: CniConfDir;
  private kubelet: ChildProcess | undefined;
  private kubeletExited: Promise<void> = Promise.resolve();
  private kubeletLog = "";
  /** kubelet's API port, fixed at start (0 until then). */
  private port: number;
  /** cridock's /metrics port on 127.0.0.1, the same across cridock restarts. */
  metricsPort = 0;

  constructor(readonly options: KubeletEnvOptions, scratch: string) {
    this.evented = options.evented ?? process.env.CRIDOCK_E2E_EVENTED_PLEG === "1";
    this.scratch = scratch;
    this.manifests = join(scratch, "manifests");
    this.podLogs = join(scratch, "pod-logs");
    this.kubeletRoot = join(scratch, "kubelet");
    this.cridockRoot = join(scratch, "cridock");
    this.socketPath = join(scratch, "cridock.sock");
    this.cniCache = join(scratch, "cni-cache");
    this.port = options.kubeletPort ?? 0;
  }

  static async start(options: KubeletEnvOptions = {}): Promise<KubeletEnv> {
    const env = new KubeletEnv(options, await mkdtemp(join(tmpdir(), "cridock-e2e-")));
    await Promise.all([mkdir(env.manifests), mkdir(env.podLogs), mkdir(env.kubeletRoot)]);
    try {
      refuseOccupiedBridge(options.bridge ?? E2E_BRIDGE);
      env.cni = await makeCniConfDir({ bridge: options.bridge ?? E2E_BRIDGE, subnet: options.subnet ?? E2E_SUBNET, networkName: E2E_NETWORK });
      env.dockerd = await privateDockerd({ bridge: options.dockerBridge ?? E2E_DOCKER_BRIDGE });
      await env.dockerd.start();
      if (options.metrics ?? true) env.metricsPort = await freePort();
      if (!env.port) env.port = await freePort();
      await env.startCridock();
      await env.startKubelet();
      return env;
    } catch (err) {
      await env.destroy().catch(() => undefined);
      throw err;
    }
  }

  /** The docker CLI against the private dockerd. */
  docker(...args: string[]): string {
    return execFileSync("docker", ["-H", this.dockerd.endpoint, ...args], { encoding: "utf8", timeout: 120_000 }).trim();
  }

  async startCridock(): Promise<void> {
    // What cri-dockerd and cridock share: the node's engine, pause image and CNI.
    const nodeFlags = [
      `--docker-endpoint=${this.dockerd.endpoint}`,
      `--pod-infra-container-image=${PAUSE_IMAGE}`,
      "--network-plugin=cni",
      `--cni-conf-dir=${this.cni.dir}`,
      `--cni-bin-dir=${CNI_BIN_DIR}`,
      `--cni-cache-dir=${this.cniCache}`,
    ];
    if (this.options.containerd) {
      this.cridock = await startContainerdProcess({
        ...this.options.containerd,
        pauseImage: PAUSE_IMAGE,
        cniBinDir: CNI_BIN_DIR,
        cniConfDir: this.cni.dir,
        socketPath: this.socketPath,
        rootDirectory: this.cridockRoot,
      });
      return;
    }
    if (this.options.criDockerd) {
      this.cridock = await startCriDockerdProcess({
        binary: this.options.criDockerd,
        socketPath: this.socketPath,
        rootDirectory: this.cridockRoot,
        flags: nodeFlags,
      });
      return;
    }
    this.cridock = await startCridockProcess({
      entry: this.options.cridockEntry,
      executable: this.options.cridockExecutable,
      runtime: this.options.cridockRuntime,
      // An executable takes no node flags; Deno takes its own (cridock-process.ts's DENO_V8_FLAGS).
      nodeFlags: this.options.cridockExecutable || this.options.cridockRuntime === "deno" ? undefined : this.options.cridockNodeFlags,
      env: this.options.cridockEnv,
      socketPath: this.socketPath,
      rootDirectory: this.cridockRoot,
      flags: [
        ...nodeFlags,
        "--streaming-bind-addr=127.0.0.1:0",
        ...(this.metricsPort ? [`--metrics-bind-addr=127.0.0.1:${this.metricsPort}`] : []),
        `--log-level=${this.options.cridockLogLevel ?? "info"}`,
      ],
    });
  }

  /** cridock's own metrics (counters restart with cridock). */
  metrics(): Promise<Samples> {
    if (!this.metricsPort) throw new Error("this environment's cridock serves no metrics");
    return scrape(this.metricsPort);
  }

  async restartCridock(): Promise<void> {
    await this.cridock.stop();
    await this.startCridock();
  }

  kubeletConfig(): Record<string, unknown> {
    return {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: "127.0.0.1",
      port: this.port,
      readOnlyPort: 0,
      healthzPort: 0,
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false }, x509: {} },
      authorization: { mode: "AlwaysAllow" },
      staticPodPath: this.manifests,
      fileCheckFrequency: "1s",
      syncFrequency: "5s",
      containerRuntimeEndpoint: `unix://${this.socketPath}`,
      imageServiceEndpoint: `unix://${this.socketPath}`,
      cgroupDriver: "cgroupfs",
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failCgroupV1: false,
      failSwapOn: false,
      podLogsDir: this.podLogs,
      resolvConf: "",
      serializeImagePulls: false,
      // The shared machine's disk and memory are not this node's business.
      evictionHard: { "memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%" },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      containerLogMaxSize: "64Ki",
      containerLogMaxFiles: 3,
      containerLogMonitorInterval: "3s",
      featureGates: { EventedPLEG: this.evented, PodAndContainerStatsFromCRI: true },
      ...this.options.config,
    };
  }

  async startKubelet(extraConfig: Record<string, unknown> = {}): Promise<void> {
    const configPath = join(this.scratch, "kubelet-config.json");
    await writeFile(configPath, JSON.stringify({ ...this.kubeletConfig(), ...extraConfig }, null, 2));
    const child = spawn(
      KUBELET_BIN,
      [
        `--config=${configPath}`,
        `--root-dir=${this.kubeletRoot}`,
        `--cert-dir=${join(this.kubeletRoot, "pki")}`,
        `--hostname-override=${NODE_NAME}`,
        "--v=2",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.kubelet = child;
    this.kubeletLog = "";
    const take = (d: Buffer) => (this.kubeletLog = (this.kubeletLog + d.toString()).slice(-4_000_000));
    child.stdout!.on("data", take);
    child.stderr!.on("data", take);
    this.kubeletExited = new Promise((resolve) => child.once("exit", () => resolve()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`kubelet exited with ${child.exitCode}:\n${this.kubeletLog.slice(-6000)}`);
      const ok = await this.get("/healthz").then((r) => r.status === 200, () => false);
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`kubelet did not answer /healthz in time:\n${this.kubeletLog.slice(-6000)}`);
      await sleep(250);
    }
  }

  async stopKubelet(): Promise<void> {
    if (!this.kubelet || this.kubelet.exitCode !== null) return;
    this.kubelet.kill("SIGTERM");
    await this.kubeletExited;
  }

  async restartKubelet(extraConfig: Record<string, unknown> = {}): Promise<void> {
    await this.stopKubelet();
    await this.startKubelet(extraConfig);
  }

  kubeletLogs(): string {
    return this.kubeletLog;
  }

  /** GET on kubelet's API (TLS with its self-signed certificate, anonymous). */
  get(path: string, timeoutMs = 15_000): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: this.port, path, method: "GET", rejectUnauthorized: false, timeout: timeoutMs },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
      req.on("error", reject);
      req.end();
    });
  }

  /** POST on kubelet's API (/run). */
  post(path: string, timeoutMs = 30_000): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: this.port, path, method: "POST", rejectUnauthorized: false, timeout: timeoutMs },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("timeout", () => req.destroy(new Error(`POST ${path} timed out`)));
      req.on("error", reject);
      req.end();
    });
  }

  get kubeletPort(): number {
    return this.port;
  }

  /** Static pod names get the node name appended. */
  podName(name: string): string {
    return `${name}-${NODE_NAME}`;
  }

  async writePod(pod: Record<string, unknown>): Promise<void> {
    const name = (pod.metadata as { name: string }).name;
    const manifest = { apiVersion: "v1", kind: "Pod", ...pod };
    const tmp = join(this.scratch, `.${name}.json`);
    await writeFile(tmp, JSON.stringify(manifest));
    execFileSync("mv", [tmp, join(this.manifests, `${name}.json`)]);
  }

  async deletePod(name: string): Promise<void> {
    await unlink(join(this.manifests, `${name}.json`)).catch(() => undefined);
  }

  async pods(): Promise<PodView[]> {
    const res = await this.get("/pods");
    if (res.status !== 200) throw new Error(`GET /pods: ${res.status} ${res.body}`);
    return (JSON.parse(res.body) as { items: PodView[] | null }).items ?? [];
  }

  async pod(name: string): Promise<PodView | undefined> {
    const full = this.podName(name);
    return (await this.pods()).find((p) => p.metadata.name === full);
  }

  /** Polls until `check` returns a truthy value for the pod; returns it. */
  async waitPod<T>(name: string, what: string, check: (pod: PodView) => T | undefined | false, timeoutMs = 90_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last: PodView | undefined;
    for (;;) {
      last = await this.pod(name).catch(() => undefined);
      if (last) {
        const value = check(last);
        if (value) return value;
      }
      if (Date.now() > deadline) {
        throw new Error(`pod ${name}: ${what} did not happen within ${timeoutMs} ms; last status ${JSON.stringify(last?.status)}`);
      }
      await sleep(300);
    }
  }

  waitRunning(name: string, timeoutMs = 90_000): Promise<PodView> {
    return this.waitPod(name, "all containers ready", (p) => {
      const cs = p.status.containerStatuses ?? [];
      return cs.length > 0 && cs.every((c) => c.ready && c.state.running) ? p : undefined;
    }, timeoutMs);
  }

  /** The docker CLI without blocking the event loop (for loops that time other calls). */
  async dockerAsync(...args: string[]): Promise<string> {
    const { stdout } = await promisify(execFile)("docker", ["-H", this.dockerd.endpoint, ...args], { encoding: "utf8", timeout: 120_000 });
    return stdout.trim();
  }

  async runningPodContainers(): Promise<number> {
    if (this.options.containerd) {
      // No Docker behind it: its own CRI says which containers run (state 1, CONTAINER_RUNNING).
      const res = await this.cridock.client.call("ListContainers", { filter: { state: { state: 1 } } });
      return (res.containers ?? []).length;
    }
    const out = await this.dockerAsync("ps", "-q", "--filter", "label=io.kubernetes.docker.type");
    return out.split("\n").filter(Boolean).length;
  }

  /** Containers (all states) of the private dockerd that belong to pods (cridock's type label). */
  podContainers(filter = ""): string[] {
    const out = this.docker("ps", "-a", "--no-trunc", "--filter", "label=io.kubernetes.docker.type", "--format", "{{.ID}} {{.Names}} {{.State}}");
    return out.split("\n").filter((l) => l && l.includes(filter));
  }

  /** Waits until no container of the pod (by static pod name) is left in Docker. */
  async waitPodGone(name: string, timeoutMs = 120_000): Promise<void> {
    const marker = `_${this.podName(name)}_`;
    const deadline = Date.now() + timeoutMs;
    while (this.podContainers(marker).length > 0) {
      if (Date.now() > deadline) throw new Error(`pod ${name}: containers still exist after ${timeoutMs} ms: ${this.podContainers(marker).join(", ")}`);
      await sleep(500);
    }
  }

  /** Everything that would be left behind by pods: one entry per kind of leak. */
  async leaks(): Promise<Record<string, string[]>> {
    const mountinfo = execFileSync("cat", ["/proc/self/mountinfo"], { encoding: "utf8" });
    const veths = bridgePorts(this.cni.bridge);
    const ipam = await readdir(join(this.cni.ipamDataDir, this.cni.networkName)).catch(() => [] as string[]);
    return {
      containers: this.podContainers(),
      netnsMounts: mountinfo.split("\n").filter((l) => l.includes(join(this.cridockRoot, "netns"))),
      netnsHandles: await readdir(join(this.cridockRoot, "netns")).catch(() => []),
      checkpoints: await readdir(join(this.cridockRoot, "sandbox")).catch(() => []),
      veths,
      ips: ipam.filter((f) => !f.startsWith("last_reserved_ip") && f !== "lock"),
    };
  }

  async destroy(): Promise<void> {
    for (const f of await readdir(this.manifests).catch(() => [] as string[])) await unlink(join(this.manifests, f)).catch(() => undefined);
    // Let kubelet tear the pods down through cridock (network included), bounded.
    const deadline = Date.now() + 60_000;
    while (this.kubelet?.exitCode === null && this.podContainers().some((l) => / running$/.test(l)) && Date.now() < deadline) await sleep(500);
    await this.stopKubelet();
    // Whatever is left goes through cridock too, so CNI DEL runs and no IP leaks.
    if (this.cridock) {
      await removeAllPods(this.cridock).catch(() => undefined);
      await this.cridock.stop().catch(() => undefined);
    }
    if (this.dockerd) {
      try {
        const ids = this.docker("ps", "-aq");
        if (ids) this.docker("rm", "-f", ...ids.split("\n"));
      } catch {
        // the daemon may be gone already
      }
      await this.dockerd.destroy().catch(() => undefined);
    }
    try {
      if (this.cni) execFileSync("ip", ["link", "delete", this.cni.bridge], { stdio: "ignore" });
    } catch {
      // never created
    }
    await this.cni?.cleanup();
    // kubelet bind-mounts its root directory onto itself (and leaves it so): unmount what is ours first.
    unmountUnder(this.scratch);
    await rm(this.scratch, { recursive: true, force: true }).catch(() => undefined);
  }
}

async function removeAllPods(cridock: CridockProcess): Promise<void> {
  const { items } = (await cridock.client.call("ListPodSandbox", {})) as { items: { id: string }[] };
  for (const s of items) {
    await cridock.client.call("StopPodSandbox", { podSandboxId: s.id }).catch(() => undefined);
    await cridock.client.call("RemovePodSandbox", { podSandboxId: s.id }).catch(() => undefined);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Every environment deletes its bridge at the end, so one that still has
 * interfaces at the start holds the pods of a run killed before its cleanup
 * (their namespaces pinned under its scratch directory): the leak checks
 * would count them as this run's. Said at once, with the way out.
 */
function refuseOccupiedBridge(bridge: string): void {
  const attached = bridgePorts(bridge);
  if (attached.length > 0) {
    throw new Error(`bridge ${bridge} already has ${attached.length} interface(s) attached, left by a killed earlier run: scripts/env/killed-run.sh clears them`);
  }
}

/** The interfaces attached to `bridge` (`ip -o link` lines); none when it does not exist. */
function bridgePorts(bridge: string): string[] {
  try {
    return execFileSync("ip", ["-o", "link", "show", "master", bridge], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")
      .filter(Boolean);
  } catch {
    return [];
  }
}
