/**
 * Gathers the facts `cridock check` judges, by looking at the node the way
 * cridock itself would at start: the same Docker client, CNI loader,
 * capability reader and socket rules. Probes only read and test-bind, with
 * two exceptions: they ask dockerd's registry lookup for the pause image when
 * it is absent (no pull), and on a host whose capability bounding set is not
 * full they start a privileged pause container and remove it (privileged.ts),
 * because only the engine knows whether it can start one there.
 */
import { execFile } from "node:child_process";
import { access, constants, readFile, stat, statfs } from "node:fs/promises";
import { createServer, connect } from "node:net";
import { dirname, join } from "node:path";
import type { Config } from "../config.ts";
import { inspectLayer } from "../oci/layer.ts";
import { DockerClient } from "../docker/client.ts";
import { describeCause } from "../errors.ts";
import type { Logger } from "../log.ts";
import { findPlugin, loadNetworkConfig } from "../network/conf.ts";
import { readHostCapabilities } from "../runtime/container/capabilities.ts";
import { decideOomScorePolicy, readOomScoreFacts } from "../runtime/container/oom-score.ts";
import { mountOf, type NodeFacts } from "./evaluate.ts";
import { probePrivileged } from "./privileged.ts";
import { probeRuntime } from "./runtime.ts";

const PROBE_TIMEOUT_MS = 10_000;

export async function probeNode(config: Config, log: Logger): Promise<NodeFacts> {
  const docker = new DockerClient({ endpoint: config.dockerEndpoint, requestTimeoutMs: PROBE_TIMEOUT_MS, logger: log });
  try {
    const [dockerFacts, hostCgroupVersion, cni, root, capabilities, oomScore, streaming, socket] = await Promise.all([
      probeDocker(docker),
      probeHostCgroup(),
      probeCni(config),
      probeRoot(config.rootDirectory),
      readHostCapabilities().catch((err: unknown) => ({ error: describeCause(err) })),
      // The check's own score stands for the server's: both start from the same unit or shell.
      readOomScoreFacts().then(
        (facts) => decideOomScorePolicy(config.restrictOomScoreAdj, facts),
        (err: unknown) => ({ error: describeCause(err) }),
      ),
      probeBind(config.streamingHost, config.streamingPort),
      probeSocket(config),
    ]);
    const pause = dockerFacts.ok ? await probePause(docker, config.podInfraContainerImage) : { image: config.podInfraContainerImage, present: false, error: "dockerd does not answer" };
    const privileged = await probePrivileged(docker, { dockerUp: dockerFacts.ok, pause, capabilities });
    const ociLayer = dockerFacts.ok ? await probeOciLayer(docker) : undefined;
    const checkpoint = dockerFacts.ok ? await probeCheckpoint(docker) : undefined;
    return { runtime: probeRuntime(), dockerEndpoint: config.dockerEndpoint, docker: dockerFacts, hostCgroupVersion, cni, root, capabilities, privileged, oomScore, ociLayer, checkpoint, pause, streaming, socket };
  } finally {
    await docker.close();
  }
}

/** dockerd's experimental mode, and where criu is (runc finds it on PATH; Debian puts it in /usr/sbin). */
async function probeCheckpoint(docker: DockerClient): Promise<NodeFacts["checkpoint"]> {
  const experimental = await docker.info().then((info) => Boolean(info.ExperimentalBuild), () => false);
  const directories = [...new Set([...(process.env.PATH ?? "").split(":").filter((d) => d.startsWith("/")), "/usr/sbin", "/sbin"])];
  for (const dir of directories) {
    const path = join(dir, "criu");
    if (await access(path, constants.X_OK).then(() => true, () => false)) return { experimental, criu: path };
  }
  return { experimental };
}

async function probeOciLayer(docker: DockerClient): Promise<NodeFacts["ociLayer"]> {
  try {
    const state = await inspectLayer(await docker.info());
    if (!state.ready) return state;
    // It works when a call through it reaches the real runtime: its version, through the launcher.
    const version = await runForOutput(state.layer.launcher, ["--version"]);
    if (!version.ok) return { ready: false, reason: `the launcher ${state.layer.launcher} does not run: ${version.output || "no output"}` };
    const delegate = `${state.layer.delegate} (${version.output.split("\n")[0]})`;
    return { ready: true, runtime: state.layer.runtime, launcher: state.layer.launcher, delegate };
  } catch (err) {
    return { ready: false, reason: `dockerd's runtimes could not be read: ${describeCause(err)}` };
  }
}

/** A command's first 4 KiB of output and whether it exited 0 within 10 s. */
function runForOutput(command: string, args: string[]): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: 10_000, maxBuffer: 64 * 1024 }, (err, stdout, stderr) => {
      resolve({ ok: !err, output: `${stdout}${stderr}`.trim().slice(0, 4096) });
    });
  });
}

async function probeDocker(docker: DockerClient): Promise<NodeFacts["docker"]> {
  try {
    await docker.ping();
    const [version, info, apiVersion] = await Promise.all([docker.version(), docker.info(), docker.apiVersion()]);
    return { ok: true, version: version.Version, apiVersion: version.ApiVersion ?? apiVersion, cgroupDriver: info.CgroupDriver, cgroupVersion: info.CgroupVersion };
  } catch (err) {
    return { ok: false, error: describeCause(err) };
  }
}

async function probeHostCgroup(): Promise<1 | 2 | undefined> {
  if (await exists("/sys/fs/cgroup/cgroup.controllers")) return 2;
  if (await exists("/sys/fs/cgroup/memory")) return 1;
  return undefined;
}

async function probeCni(config: Config): Promise<NodeFacts["cni"]> {
  if (config.networkPlugin !== "cni") return { plugin: "no-op" };
  const [loaded, loopback] = await Promise.all([loadNetworkConfig(config.cniConfDir, config.cniBinDirs), findPlugin("loopback", config.cniBinDirs)]);
  return {
    plugin: "cni",
    confDir: config.cniConfDir,
    binDirs: config.cniBinDirs,
    config: loaded.config && { file: loaded.config.file, name: loaded.config.name, plugins: loaded.config.plugins.map((p) => p.type) },
    problems: loaded.problems,
    loopback: Boolean(loopback),
  };
}

/** The root directory, or the nearest ancestor that exists (cridock creates the rest). */
async function probeRoot(path: string): Promise<NodeFacts["root"]> {
  let existing = path;
  for (;;) {
    const s = await stat(existing).catch(() => undefined);
    if (s) {
      if (!s.isDirectory()) return { path, existing, readOnly: false, writable: false, error: `${existing} is not a directory` };
      break;
    }
    if (existing === "/") break;
    existing = dirname(existing);
  }
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const mount = mountOf(mountinfo, existing);
  const writable = await access(existing, constants.W_OK).then(() => true, () => false);
  // statfs is missing on some runtimes (older Deno); free space is then not reported.
  const freeBytes = await statfs(existing).then((s) => s.bavail * s.bsize, () => undefined).catch(() => undefined);
  return { path, existing, fsType: mount?.fsType, mountPoint: mount?.mountPoint, readOnly: mount?.readOnly ?? false, writable, freeBytes };
}

async function probePause(docker: DockerClient, image: string): Promise<NodeFacts["pause"]> {
  try {
    await docker.inspectImage(image);
    return { image, present: true };
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) return { image, present: false, error: describeCause(err) };
  }
  try {
    // dockerd asks the registry for the manifest (as a pull would start), downloading nothing.
    await docker.json("GET", `/distribution/${image}/json`, { timeoutMs: PROBE_TIMEOUT_MS });
    return { image, present: false, pullable: true };
  } catch (err) {
    return { image, present: false, pullable: false, error: describeCause(err) };
  }
}

export function probeBind(host: string, port: number): Promise<NodeFacts["streaming"]> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) =>
      resolve({ host, port, bindable: false, error: err.code === "EADDRINUSE" ? `port ${port} is in use (by a running cridock?)` : err.message }),
    );
    server.listen(port, host, () => server.close(() => resolve({ host, port, bindable: true })));
  });
}

async function probeSocket(config: Config): Promise<NodeFacts["socket"]> {
  if (config.socketActivated) return { activated: true };
  const path = config.listenSocket;
  const dirError = await usableDir(dirname(path));
  const s = await stat(path).catch(() => undefined);
  if (!s) return { activated: false, path, state: "absent", dirUsable: dirError === undefined, dirError };
  if (!s.isSocket()) return { activated: false, path, state: "not-socket", mode: s.mode, dirUsable: true };
  const live = await answers(path);
  return { activated: false, path, state: live ? "live" : "stale", mode: s.mode, dirUsable: true };
}

/** undefined when the socket's directory exists and is writable, or can be created under a writable ancestor. */
async function usableDir(dir: string): Promise<string | undefined> {
  let current = dir;
  for (;;) {
    const s = await stat(current).catch(() => undefined);
    if (s) {
      if (!s.isDirectory()) return `${current} is not a directory`;
      return (await access(current, constants.W_OK).then(() => true, () => false)) ? undefined : `${current} is not writable`;
    }
    if (current === "/") return "no existing ancestor";
    current = dirname(current);
  }
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    const finish = (v: boolean) => {
      socket.destroy();
      resolve(v);
    };
    socket.once("connect", () => finish(true));
    socket.once("error", () => finish(false));
    socket.setTimeout(2000, () => finish(false));
  });
}

function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false);
}
