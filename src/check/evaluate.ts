/**
 * `cridock check`'s judgement, as pure functions: the facts probes.ts
 * gathered about the node → one verdict per item, with the fix. "fail"
 * means cridock could not serve pods with this configuration; "warn" means
 * it could, with a limitation the operator should know about.
 */
import { compareApiVersions, MIN_API_VERSION } from "../docker/api-version.ts";
import type { OomScorePolicy } from "../runtime/container/oom-score.ts";

export type Verdict = "ok" | "warn" | "fail";

export interface CheckItem {
  name: string;
  verdict: Verdict;
  detail: string;
  fix?: string;
}

/**
 * The oldest Node.js line cridock supports and is tested on (package.json's
 * engines; test/unit/check/runtime.test.ts keeps the two equal).
 */
export const OLDEST_NODE_LINE = 26;

export interface NodeFacts {
  /** The JavaScript runtime this cridock runs on (check/runtime.ts). */
  runtime: { name: "node" | "deno"; version: string; v8: string; path: string; selfContained: boolean };
  dockerEndpoint: string;
  docker: { ok: true; version: string; apiVersion: string; cgroupDriver: string; cgroupVersion?: string } | { ok: false; error: string };
  /** cgroup version the host mounts at /sys/fs/cgroup (undefined: neither found). */
  hostCgroupVersion?: 1 | 2;
  cni:
    | { plugin: "no-op" }
    | { plugin: "cni"; confDir: string; binDirs: string[]; config?: { file: string; name: string; plugins: string[] }; problems: string[]; loopback: boolean };
  root: { path: string; existing: string; fsType?: string; mountPoint?: string; readOnly: boolean; writable: boolean; freeBytes?: number; error?: string };
  capabilities: { granted: string[]; missing: string[] } | { error: string };
  /**
   * What the engine did when asked, as RunPodSandbox asks it, to start a
   * privileged pause container; tried only when the bounding set lacks some
   * capability (on a full set every engine grants them all).
   */
  privileged: PrivilegedProbe;
  /** The oom_score_adj policy these flags give on this host (container/oom-score.ts). */
  oomScore: OomScorePolicy | { error: string };
  pause: { image: string; present: boolean; pullable?: boolean; error?: string };
  streaming: { host: string; port: number; bindable: boolean; error?: string };
  /**
   * What checkpoints need (CheckpointContainer, CheckpointPod, RestorePod):
   * dockerd in experimental mode and criu on its PATH; undefined when
   * dockerd does not answer.
   */
  checkpoint?: { experimental: boolean; criu?: string };
  /** cridock's OCI runtime layer as dockerd has it (src/oci/layer.ts); undefined when dockerd does not answer. */
  ociLayer?: { ready: true; runtime: string; launcher: string; delegate: string } | { ready: false; reason: string };
  socket:
    | { activated: true }
    | { activated: false; path: string; state: "absent" | "stale" | "live" | "not-socket"; mode?: number; dirUsable: boolean; dirError?: string };
}

export type PrivilegedProbe =
  | { tried: false; reason: string }
  | { tried: true; outcome: "started" }
  | { tried: true; outcome: "refused"; message: string }
  | { tried: true; outcome: "error"; message: string };

const GiB = 1024 ** 3;
const PSEUDO_FILESYSTEMS = new Set(["proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "nsfs", "bpf"]);

export function evaluate(facts: NodeFacts): CheckItem[] {
  return [
    runtimeItem(facts),
    dockerItem(facts),
    cgroupItem(facts),
    cniItem(facts),
    rootItem(facts),
    capabilitiesItem(facts),
    oomScoreItem(facts),
    ociLayerItem(facts),
    mountOptionsItem(facts),
    checkpointItem(facts),
    pauseItem(facts),
    streamingItem(facts),
    socketItem(facts),
  ];
}

export function runtimeItem({ runtime }: Pick<NodeFacts, "runtime">): CheckItem {
  if (runtime.name === "deno") return { name: "runtime", verdict: "ok", detail: `Deno ${runtime.version} (V8 ${runtime.v8}) at ${runtime.path}` };
  const where = runtime.selfContained ? `embedded in ${runtime.path}` : `at ${runtime.path}`;
  const detail = `Node.js ${runtime.version} (V8 ${runtime.v8}) ${where}`;
  const major = Number(/^v(\d+)\./.exec(runtime.version)?.[1]);
  if (!(major >= OLDEST_NODE_LINE)) {
    return { name: "runtime", verdict: "warn", detail: `${detail}: older than Node ${OLDEST_NODE_LINE}, the oldest line cridock is tested on`, fix: `run cridock on Node ${OLDEST_NODE_LINE} or newer, or install the cridock package, whose executable carries its own Node` };
  }
  return { name: "runtime", verdict: "ok", detail };
}

function dockerItem({ docker, dockerEndpoint }: NodeFacts): CheckItem {
  if (!docker.ok) {
    return {
      name: "docker",
      verdict: "fail",
      detail: `dockerd does not answer at ${dockerEndpoint}: ${docker.error}`,
      fix: "start dockerd (systemctl start docker) or point --docker-endpoint at its socket",
    };
  }
  if (compareApiVersions(docker.apiVersion, MIN_API_VERSION) < 0) {
    return {
      name: "docker",
      verdict: "fail",
      detail: `dockerd ${docker.version} at ${dockerEndpoint} offers Engine API ${docker.apiVersion}; cridock needs ${MIN_API_VERSION} or newer`,
      fix: "upgrade Docker Engine to 20.10 or newer",
    };
  }
  return { name: "docker", verdict: "ok", detail: `dockerd ${docker.version} at ${dockerEndpoint}, Engine API ${docker.apiVersion}` };
}

function cgroupItem({ docker, hostCgroupVersion }: NodeFacts): CheckItem {
  if (!docker.ok) return { name: "cgroup", verdict: "fail", detail: "unknown: dockerd does not answer", fix: "fix docker first" };
  const version = docker.cgroupVersion ?? (hostCgroupVersion ? String(hostCgroupVersion) : "unknown");
  const detail = `driver ${docker.cgroupDriver}, cgroup v${version}`;
  const kubelet = `kubelet's --cgroup-driver (cgroupDriver) must be ${docker.cgroupDriver}`;
  if (docker.cgroupDriver !== "systemd" && docker.cgroupDriver !== "cgroupfs") {
    return { name: "cgroup", verdict: "fail", detail, fix: "run dockerd with cgroups (exec-opts native.cgroupdriver=systemd or cgroupfs); kubelet cannot work without" };
  }
  if (hostCgroupVersion !== undefined && docker.cgroupVersion && docker.cgroupVersion !== String(hostCgroupVersion)) {
    return { name: "cgroup", verdict: "warn", detail: `${detail}, but /sys/fs/cgroup here is v${hostCgroupVersion}`, fix: "run cridock in dockerd's cgroup namespace (on the host): its stats read the cgroup files" };
  }
  if (version === "1") {
    return { name: "cgroup", verdict: "warn", detail: `${detail} (cgroup v1 is deprecated by kubelet 1.31+)`, fix: `${kubelet}; move the node to cgroup v2 (systemd.unified_cgroup_hierarchy=1) when you can` };
  }
  return { name: "cgroup", verdict: "ok", detail: `${detail}; ${kubelet}` };
}

function ociLayerItem({ docker, hostCgroupVersion, ociLayer }: NodeFacts): CheckItem {
  const name = "oci-layer";
  if (!docker.ok || !ociLayer) return { name, verdict: "warn", detail: "unknown: dockerd does not answer" };
  if (ociLayer.ready) return { name, verdict: "ok", detail: `runtime "${ociLayer.runtime}" → ${ociLayer.launcher} (real runtime ${ociLayer.delegate}): unified settings are in force before a container's first instruction` };
  const v2 = (docker.cgroupVersion ?? String(hostCgroupVersion ?? "")) === "2";
  if (!v2) return { name, verdict: "ok", detail: `not registered, and not needed on cgroup v1 for unified settings (${ociLayer.reason})` };
  return {
    name,
    verdict: "warn",
    detail: `${ociLayer.reason}; without it, kubelet's unified settings (memory.oom.group) are written after each container starts, not before its first instruction`,
    fix: "cridock oci-layer install",
  };
}

/**
 * Bind mount options (kubelet's VolumeBindMountOptions: noexec, nodev,
 * nosuid on a volume) need the layer on any node: Docker's API has no
 * field for them. Without it Status declares no `mount_options`, and
 * kubelet refuses the pods that ask (PodFeatureUnsupported).
 */
function mountOptionsItem({ docker, ociLayer }: NodeFacts): CheckItem {
  const name = "mount-options";
  if (!docker.ok || !ociLayer) return { name, verdict: "warn", detail: "unknown: dockerd does not answer" };
  if (ociLayer.ready) return { name, verdict: "ok", detail: `bind mount options (noexec, nodev, nosuid) are honoured: the layer adds them to each volume's mount; Status declares mount_options` };
  return {
    name,
    verdict: "warn",
    detail: `bind mount options (noexec, nodev, nosuid) cannot be honoured: ${ociLayer.reason}; Status declares no mount_options, so kubelet refuses pods whose volumes ask for them`,
    fix: "cridock oci-layer install",
  };
}

/**
 * Checkpoints go through Docker's checkpoint API, which dockerd serves
 * only in experimental mode, with criu installed. Without them the node
 * serves pods as before, and the checkpoint RPCs answer UNIMPLEMENTED
 * saying so.
 */
export function checkpointItem({ docker, checkpoint }: Pick<NodeFacts, "docker" | "checkpoint">): CheckItem {
  const name = "checkpoint";
  const rpcs = "CheckpointContainer, CheckpointPod and RestorePod";
  if (!docker.ok || !checkpoint) return { name, verdict: "warn", detail: "unknown: dockerd does not answer" };
  const missing = [
    ...(checkpoint.experimental ? [] : ["dockerd runs without --experimental (Docker serves checkpoints only in experimental mode)"]),
    ...(checkpoint.criu ? [] : ["criu is not installed (no criu on PATH, /usr/sbin or /sbin)"]),
  ];
  if (missing.length === 0) return { name, verdict: "ok", detail: `${rpcs} are served: dockerd runs in experimental mode and criu is ${checkpoint.criu}` };
  const fix = [
    ...(checkpoint.experimental ? [] : ['set "experimental": true in /etc/docker/daemon.json and restart docker']),
    ...(checkpoint.criu ? [] : ["install criu (apt-get install criu)"]),
  ].join("; ");
  return { name, verdict: "warn", detail: `${rpcs} answer UNIMPLEMENTED: ${missing.join("; ")}`, fix: `if you need checkpoints: ${fix}` };
}

function cniItem({ cni }: NodeFacts): CheckItem {
  if (cni.plugin === "no-op") {
    return { name: "cni", verdict: "ok", detail: "--network-plugin=no-op: pods use Docker's default bridge (no CNI)" };
  }
  if (!cni.loopback) {
    return {
      name: "cni",
      verdict: "fail",
      detail: `the loopback plugin is not in ${cni.binDirs.join(", ")}`,
      fix: "install the CNI plugins (apt-get install containernetworking-plugins) or set --cni-bin-dir",
    };
  }
  if (!cni.config) {
    return {
      name: "cni",
      verdict: "fail",
      detail: `no usable network config in ${cni.confDir}: ${cni.problems.join("; ") || "none found"}`,
      fix: `put a .conflist in ${cni.confDir} whose plugins are in ${cni.binDirs.join(", ")} (scripts/install.sh installs a default bridge one)`,
    };
  }
  const skipped = cni.problems.length ? ` (skipped: ${cni.problems.join("; ")})` : "";
  return {
    name: "cni",
    verdict: "ok",
    detail: `network ${cni.config.name} from ${cni.config.file}, plugins ${cni.config.plugins.join(", ")} all present${skipped}`,
  };
}

function rootItem({ root }: NodeFacts): CheckItem {
  const where = `${root.path} on ${root.fsType ?? "an unknown filesystem"}${root.mountPoint ? ` (${root.mountPoint})` : ""}`;
  const free = root.freeBytes !== undefined ? `, ${(root.freeBytes / GiB).toFixed(1)} GiB free` : "";
  if (root.error) return { name: "root-directory", verdict: "fail", detail: `${root.path}: ${root.error}`, fix: "set --root-directory to a local directory root can write" };
  if (root.fsType && PSEUDO_FILESYSTEMS.has(root.fsType)) {
    return { name: "root-directory", verdict: "fail", detail: `${where} is a kernel pseudo-filesystem`, fix: "set --root-directory to a directory on a disk, e.g. /var/lib/cridock" };
  }
  if (root.readOnly || !root.writable) {
    return {
      name: "root-directory",
      verdict: "fail",
      detail: `${where} is not writable${root.readOnly ? " (mounted read-only)" : ""}`,
      fix: "set --root-directory to a writable local directory: it holds the sandbox checkpoints and netns handles",
    };
  }
  if (root.fsType === "nfs" || root.fsType === "nfs4" || root.fsType === "fuse" || root.fsType?.startsWith("fuse.")) {
    return { name: "root-directory", verdict: "warn", detail: `${where}${free}: netns bind mounts and atomic renames need a local filesystem`, fix: "use a local filesystem for --root-directory" };
  }
  if (root.freeBytes !== undefined && root.freeBytes < 100 * 1024 ** 2) {
    return { name: "root-directory", verdict: "warn", detail: `${where}${free}`, fix: "free some space: checkpoints cannot be written on a full disk" };
  }
  return { name: "root-directory", verdict: "ok", detail: `${where}${free}` };
}

function capabilitiesItem({ capabilities, privileged, docker }: NodeFacts): CheckItem {
  if ("error" in capabilities) return { name: "capabilities", verdict: "warn", detail: `cannot read the bounding set: ${capabilities.error}` };
  const n = capabilities.granted.length;
  if (capabilities.missing.length === 0) {
    return { name: "capabilities", verdict: "ok", detail: `all ${n} capabilities in the bounding set: privileged pods get the full set` };
  }
  // cridock leaves privileged pods to the engine: what the engine did with a
  // privileged container is what privileged pods will meet.
  const lacks = `bounding set lacks ${capabilities.missing.join(", ")}`;
  const engine = docker.ok ? `Docker ${docker.version}` : "the engine";
  if (!privileged.tried) {
    return {
      name: "capabilities",
      verdict: "warn",
      detail: `${lacks}; privileged pods are left to the engine, which grants them the ${n} capabilities the host has or refuses to start them; not tried: ${privileged.reason}; "ALL" grants the ${n} others`,
      fix: "run cridock check again once dockerd answers and the pause image is present, to see what the engine does",
    };
  }
  if (privileged.outcome === "started") {
    return { name: "capabilities", verdict: "ok", detail: `${lacks}: ${engine} started a privileged container with the ${n} capabilities the host has, so privileged pods run with those; "ALL" grants the same ${n}` };
  }
  if (privileged.outcome === "refused") {
    return {
      name: "capabilities",
      verdict: "warn",
      detail: `${lacks}, and ${engine} refused to start a privileged container (${privileged.message}): privileged pods fail with FAILED_PRECONDITION; "ALL" grants the ${n} others`,
      fix: "run dockerd with the full capability set (as root outside a restricted container), or a current Docker Engine, which grants privileged containers the capabilities the host has, if the node must run privileged pods",
    };
  }
  return {
    name: "capabilities",
    verdict: "warn",
    detail: `${lacks}; trying a privileged container on ${engine} failed for another reason (${privileged.message}), so what privileged pods meet is not known; "ALL" grants the ${n} others`,
    fix: "read dockerd's log for the failure above",
  };
}

function oomScoreItem({ oomScore }: NodeFacts): CheckItem {
  const name = "oom-score-adj";
  if ("error" in oomScore) return { name, verdict: "warn", detail: `cannot tell whether scores can be lowered: ${oomScore.error}` };
  const { floor } = oomScore;
  if (oomScore.hostRestricted && !oomScore.restricted) {
    return {
      name,
      verdict: "fail",
      detail: `${oomScore.reason}: runc refuses "failed to update /proc/self/oom_score_adj: Permission denied" for Guaranteed and node-critical pods (kubelet asks -997)`,
      fix: "drop --restrict-oom-score-adj=false (auto clamps such scores), or give the node CAP_SYS_RESOURCE",
    };
  }
  if (oomScore.hostRestricted) {
    return {
      name,
      verdict: "warn",
      detail: `restricted (${oomScore.reason}): scores below ${floor} are raised to ${floor}, so Guaranteed and node-critical pods are not shielded from the OOM killer beyond the runtime's own score`,
      fix: "run the node with CAP_SYS_RESOURCE in its bounding set, outside a user namespace, for kubelet's scores to apply",
    };
  }
  if (oomScore.restricted) return { name, verdict: "ok", detail: `restricted by ${oomScore.reason}: scores below ${floor} are raised to ${floor}` };
  return { name, verdict: "ok", detail: `scores are applied as kubelet asks (${oomScore.reason})` };
}

function pauseItem({ pause }: NodeFacts): CheckItem {
  if (pause.present) return { name: "pause-image", verdict: "ok", detail: `${pause.image} is present` };
  if (pause.pullable) return { name: "pause-image", verdict: "ok", detail: `${pause.image} is not present; its registry has it, the first pod pulls it` };
  return {
    name: "pause-image",
    verdict: "fail",
    detail: `${pause.image} is not present and cannot be pulled${pause.error ? `: ${pause.error}` : ""}`,
    fix: `docker pull (or docker load) ${pause.image}, or set --pod-infra-container-image to an image the node has`,
  };
}

function streamingItem({ streaming }: NodeFacts): CheckItem {
  const addr = `${streaming.host.includes(":") ? `[${streaming.host}]` : streaming.host}:${streaming.port === 0 ? "<any free port>" : streaming.port}`;
  if (!streaming.bindable) {
    return {
      name: "streaming",
      verdict: "fail",
      detail: `cannot listen on ${addr}: ${streaming.error ?? "refused"}`,
      fix: "set --streaming-bind-addr to an address of this node and a free port (the default 127.0.0.1:0 always works)",
    };
  }
  const exposure = /^(127\.|::1$|localhost$)/.test(streaming.host)
    ? "loopback only: kubelet (1.29+) proxies exec/attach/port-forward, so this is enough"
    : "reachable from the network: exec/attach/port-forward URLs carry single-use tokens, but firewall it unless clients need it";
  return { name: "streaming", verdict: "ok", detail: `exec/attach/port-forward server can listen on ${addr}, ${exposure}` };
}

function socketItem({ socket }: NodeFacts): CheckItem {
  if (socket.activated) {
    return { name: "socket", verdict: "ok", detail: "fd://: systemd's cridock.socket creates the socket (its SocketMode=0660 sets the permissions)" };
  }
  const mode = socket.mode !== undefined ? ` mode ${(socket.mode & 0o777).toString(8).padStart(4, "0")}` : "";
  if (!socket.dirUsable) {
    return { name: "socket", verdict: "fail", detail: `cannot create ${socket.path}: ${socket.dirError ?? "its directory is unusable"}`, fix: "set --container-runtime-endpoint to a path in a writable directory" };
  }
  switch (socket.state) {
    case "not-socket":
      return { name: "socket", verdict: "fail", detail: `${socket.path} exists and is not a socket; cridock refuses to replace it`, fix: `remove ${socket.path} or choose another --container-runtime-endpoint` };
    case "live":
      if (socket.mode !== undefined && (socket.mode & 0o007) !== 0) {
        return { name: "socket", verdict: "warn", detail: `${socket.path} is served now,${mode}: other users can drive containers`, fix: `chmod 0660 ${socket.path} (cridock makes it 0660)` };
      }
      return { name: "socket", verdict: "ok", detail: `${socket.path} is served by a running runtime now,${mode} (a second cridock on it would refuse to start)` };
    case "stale":
      return { name: "socket", verdict: "ok", detail: `${socket.path} is a stale socket nobody serves; cridock replaces it and makes it 0660` };
    default:
      return { name: "socket", verdict: "ok", detail: `${socket.path} will be created with mode 0660 (root and its group)` };
  }
}

/** One line per item: `ok   name  detail — fix: …`. */
export function formatItems(items: CheckItem[]): string {
  const width = Math.max(...items.map((i) => i.name.length));
  return items
    .map((i) => `${i.verdict.toUpperCase().padEnd(4)} ${i.name.padEnd(width)}  ${i.detail}${i.fix && i.verdict !== "ok" ? ` — fix: ${i.fix}` : ""}`)
    .join("\n");
}

/** 1 when some item says cridock could not serve pods. */
export function exitCode(items: CheckItem[]): number {
  return items.some((i) => i.verdict === "fail") ? 1 : 0;
}

/** The mount that holds `path`: the longest mount point that prefixes it, from /proc/self/mountinfo. */
export function mountOf(mountinfo: string, path: string): { mountPoint: string; fsType: string; readOnly: boolean } | undefined {
  let best: { mountPoint: string; fsType: string; readOnly: boolean } | undefined;
  for (const line of mountinfo.split("\n")) {
    // id parent major:minor root mountpoint options [optional…] - fstype source superoptions
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const fields = left.split(" ");
    const mountPoint = unescapeMount(fields[4] ?? "");
    const options = (fields[5] ?? "").split(",");
    const fsType = right.split(" ")[0] ?? "";
    const inside = path === mountPoint || mountPoint === "/" || path.startsWith(`${mountPoint}/`);
    if (inside && (!best || mountPoint.length >= best.mountPoint.length)) {
      best = { mountPoint, fsType, readOnly: options.includes("ro") };
    }
  }
  return best;
}

function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}
