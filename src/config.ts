/**
 * Command-line flags and their defaults. Names follow cri-dockerd where the
 * meaning is the same, so a node can switch by changing the binary. Everything
 * is validated once here; the rest of the program trusts Config.
 */
import { parseArgs } from "node:util";
import { LOG_LEVELS, type LogLevel } from "./log.ts";
import type { OomScoreRestriction } from "./runtime/container/oom-score.ts";

export type NetworkPlugin = "cni" | "no-op";

export interface Config {
  /** unix socket path cridock serves CRI on; "" with `fd://` (socket activation: the socket is inherited). */
  listenSocket: string;
  /** `fd://`: serve on the listening socket systemd passes (LISTEN_FDS), as cri-dockerd's cri-docker.socket. */
  socketActivated: boolean;
  /** Prometheus scrape endpoint; undefined when --metrics-bind-addr is empty (off). */
  metrics?: { host: string; port: number };
  dockerEndpoint: string;
  podInfraContainerImage: string;
  networkPlugin: NetworkPlugin;
  cniConfDir: string;
  cniBinDirs: string[];
  cniCacheDir: string;
  networkPluginMtu: number;
  podCidr: string;
  /** host:port for the exec/attach/port-forward server; port 0 picks a free one. */
  streamingHost: string;
  streamingPort: number;
  /** Drop a streaming client that has read none of our output for this long (0 = never). */
  streamingStallTimeoutMs: number;
  runtimeRequestTimeoutMs: number;
  imagePullProgressDeadlineMs: number;
  rootDirectory: string;
  /** cri-dockerd's root directory, whose sandbox checkpoints mark the pods to take over ("" = none). */
  criDockerdRootDirectory: string;
  dockerLogMaxSize: string;
  dockerLogMaxFile: number;
  shutdownGraceMs: number;
  /** Raise container and sandbox oom_score_adj below cridock's own to its own: decided from the host, or forced. */
  restrictOomScoreAdj: OomScoreRestriction;
  /** Register the OCI runtime layer again when a tool rewrote daemon.json without it (src/oci/layer-reregister.ts). */
  ociLayerReregister: boolean;
  logLevel: LogLevel;
}

export const DEFAULTS = {
  "container-runtime-endpoint": "unix:///var/run/cridock.sock",
  "docker-endpoint": "unix:///var/run/docker.sock",
  // What kubeadm 1.36 expects of the runtime (`kubeadm config images list`); it warns on another.
  "pod-infra-container-image": "registry.k8s.io/pause:3.10.2",
  "network-plugin": "cni",
  "cni-conf-dir": "/etc/cni/net.d",
  // /opt/cni/bin is where upstream installs plugins; Debian puts them in /usr/lib/cni.
  "cni-bin-dir": "/opt/cni/bin,/usr/lib/cni",
  "cni-cache-dir": "/var/lib/cni/cache",
  "network-plugin-mtu": "0",
  "pod-cidr": "",
  "streaming-bind-addr": "127.0.0.1:0",
  "streaming-stall-timeout": "2m",
  "runtime-request-timeout": "2m",
  "image-pull-progress-deadline": "1m",
  "root-directory": "/var/lib/cridock",
  "cri-dockerd-root-directory": "/var/lib/cri-dockerd",
  // Docker's json-file copy is what cridock reads the CRI log from, so its
  // bound is the reader's slack. It rotates a file away only after
  // max-size × (max-file − 1) more bytes; the reader opens each new file
  // within a quarter second while running, so only downtime or a stalled
  // CRI disk can make it fall that far behind. 50m × 4 keeps ≥ 150 MB of
  // slack: ~3 s at the fastest dockerd writes json-file on a small node
  // (~50 MB/s), minutes for an ordinary busy container, at a cost of at most
  // 200 MB of disk per container.
  "docker-log-max-size": "50m",
  "docker-log-max-file": "4",
  "shutdown-grace-period": "10s",
  "metrics-bind-addr": "",
  "restrict-oom-score-adj": "auto",
  "oci-layer-reregister": "true",
  "log-level": "info",
} as const;

type FlagName = keyof typeof DEFAULTS;

const HELP: Record<FlagName, string> = {
  "container-runtime-endpoint": "CRI endpoint to serve: a unix:// socket, or fd:// for the socket systemd passes (socket activation)",
  "docker-endpoint": "Docker Engine API socket",
  "pod-infra-container-image": "image of the pause container that holds each pod's namespaces",
  "network-plugin": "pod networking: cni, or no-op for Docker's default bridge",
  "cni-conf-dir": "directory of CNI network configurations (.conf, .conflist, .json)",
  "cni-bin-dir": "comma-separated directories to search for CNI plugin binaries",
  "cni-cache-dir": "directory where CNI ADD results are cached for DEL",
  "network-plugin-mtu": "MTU passed to CNI plugins (0 = plugin default)",
  "pod-cidr": "pod CIDR for CNI ipRanges until kubelet sends one",
  "streaming-bind-addr": "ip or ip:port of the exec/attach/port-forward server (port 0 = any free port)",
  "streaming-stall-timeout": "close an exec/attach/port-forward stream whose client reads nothing for this long (0 = never)",
  "runtime-request-timeout": "deadline of each Docker API request (Go duration, e.g. 2m)",
  "image-pull-progress-deadline": "abort a pull that reports no progress for this long",
  "root-directory": "directory for cridock's checkpoints and netns handles",
  "cri-dockerd-root-directory": "cri-dockerd's root directory: pods with a cri-dockerd checkpoint there are taken over at start (\"\" = none)",
  "docker-log-max-size": "max-size of Docker's own json-file log per container, which cridock reads the CRI log from: output is lost only if cridock falls max-size × (max-file − 1) behind (down, or its log disk stalled); raise it for containers that log fast",
  "docker-log-max-file": "max-file of Docker's own json-file log per container (≥ 2 recommended: 1 makes Docker truncate in place)",
  "shutdown-grace-period": "how long SIGTERM waits for in-flight calls",
  "metrics-bind-addr": "ip:port (or port alone, for 127.0.0.1) of the Prometheus /metrics endpoint; empty = off",
  "restrict-oom-score-adj":
    "raise every container's and sandbox's oom_score_adj that is below cridock's own to its own (containerd's restrict_oom_score_adj): auto when the host cannot lower scores (no CAP_SYS_RESOURCE in the bounding set, or a user namespace), true, or false",
  "oci-layer-reregister":
    "register the OCI runtime layer with dockerd again when it is gone (a tool such as minikube rewrote daemon.json and restarted dockerd) and `cridock oci-layer install` recorded it in <root-directory>/oci-layer.json: true or false",
  "log-level": `one of ${LOG_LEVELS.join(", ")}`,
};

export class ConfigError extends Error {
  constructor(readonly flag: string, reason: string) {
    super(`invalid value for --${flag}: ${reason}`);
    this.name = "ConfigError";
  }
}

export type ParseResult = { kind: "config"; config: Config } | { kind: "help"; text: string } | { kind: "version" };

/** Parses a Go-style duration ("1m30s", "500ms", "2h", "0") into milliseconds. */
export function parseDuration(text: string): number {
  // "\u00b5s" is Go's "µs", escaped: the bundle stays ASCII (scripts/build/bundle.ts, assertAscii).
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, "\u00b5s": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const trimmed = text.trim();
  if (trimmed === "0") return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|\u00b5s|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(trimmed)) !== null) {
    total += Number(m[1]) * units[m[2]!]!;
    matched = re.lastIndex;
  }
  if (matched === 0 || matched !== trimmed.length) throw new Error(`"${text}" is not a duration like 30s, 2m or 1m30s`);
  return Math.round(total);
}

/** Parses Docker-style sizes ("10m", "1g", "512k", "100") for validation. */
export function parseSize(text: string): number {
  const m = /^(\d+)([kmg]?)$/i.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not a size like 10m, 512k or 1g`);
  const mult = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as "" | "k" | "m" | "g"];
  return Number(m[1]) * mult;
}

export function socketPathFromEndpoint(flag: string, endpoint: string): string {
  if (!endpoint.startsWith("unix://")) throw new ConfigError(flag, `"${endpoint}" must be a unix:// endpoint`);
  const path = endpoint.slice("unix://".length);
  if (!path.startsWith("/")) throw new ConfigError(flag, `"${endpoint}" must name an absolute socket path`);
  return path;
}

function parseBindAddr(value: string, flag = "streaming-bind-addr"): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:\s]+))(?::(\d{1,5}))?$/.exec(value) ?? /^([0-9a-fA-F:]+)$/.exec(value);
  if (!m) throw new ConfigError(flag, `"${value}" is not ip or ip:port`);
  const host = m[1] ?? m[2] ?? value;
  const port = m[3] === undefined ? 0 : Number(m[3]);
  if (port > 65535) throw new ConfigError(flag, `port ${port} is out of range`);
  return { host, port };
}

/**
 * --metrics-bind-addr: empty is off; a port alone (`9090`, `:9090`) binds
 * 127.0.0.1; `ip:port` binds that address as given, loopback or not (an
 * operator who names an address means it; main logs a warning when it is
 * not loopback, since the endpoint has no authentication).
 */
export function parseMetricsAddr(value: string): { host: string; port: number } | undefined {
  const text = value.trim();
  if (text === "") return undefined;
  const portOnly = /^:?(\d{1,5})$/.exec(text);
  const { host, port } = portOnly ? { host: "127.0.0.1", port: Number(portOnly[1]) } : parseBindAddr(text, "metrics-bind-addr");
  if (!portOnly && !/:\d{1,5}$/.test(text)) throw new ConfigError("metrics-bind-addr", `"${value}" needs a port: ip:port or port`);
  if (port > 65535) throw new ConfigError("metrics-bind-addr", `port ${port} is out of range`);
  return { host, port };
}

/** The CRI endpoint: a unix socket path, or socket activation for `fd://`. */
function listenEndpoint(endpoint: string): { listenSocket: string; socketActivated: boolean } {
  if (endpoint === "fd://" || endpoint === "fd://0") return { listenSocket: "", socketActivated: true };
  if (endpoint.startsWith("fd://")) {
    throw new ConfigError("container-runtime-endpoint", `"${endpoint}": only fd:// (the first socket systemd passes) is supported`);
  }
  return { listenSocket: socketPathFromEndpoint("container-runtime-endpoint", endpoint), socketActivated: false };
}

function intFlag(flag: string, value: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(value)) throw new ConfigError(flag, `"${value}" is not an integer`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(flag, `${n} is outside ${min}..${max}`);
  return n;
}

function durationFlag(flag: string, value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new ConfigError(flag, (err as Error).message);
  }
}

export function helpText(): string {
  const lines = ["Usage: cridock [flags]", "", "Serves the Kubernetes CRI v1 API over the Docker Engine API.", "", "Flags:"];
  for (const [flag, def] of Object.entries(DEFAULTS) as [FlagName, string][]) {
    lines.push(`  --${flag.padEnd(30)} ${HELP[flag]} (default "${def}")`);
  }
  lines.push(`  --${"help".padEnd(30)} print this help`, `  --${"version".padEnd(30)} print the version`);
  return lines.join("\n");
}

export function parseConfig(argv: string[]): ParseResult {
  const options: Record<string, { type: "string" | "boolean" }> = {
    help: { type: "boolean" },
    version: { type: "boolean" },
  };
  for (const flag of Object.keys(DEFAULTS)) options[flag] = { type: "string" };
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (err) {
    const message = (err as Error).message.replace(/\. To specify a positional.*$/s, "");
    throw new ConfigError(/'(--?[\w-]+)/.exec(message)?.[1]?.replace(/^-+/, "") ?? "?", message);
  }
  if (values.help) return { kind: "help", text: helpText() };
  if (values.version) return { kind: "version" };

  const get = (flag: FlagName): string => (values[flag] as string | undefined) ?? DEFAULTS[flag];
  const root = get("root-directory");
  for (const [flag, value] of [["root-directory", root], ["cni-conf-dir", get("cni-conf-dir")], ["cni-cache-dir", get("cni-cache-dir")]] as const) {
    if (!value.startsWith("/")) throw new ConfigError(flag, `"${value}" must be an absolute path`);
  }
  const criDockerdRoot = get("cri-dockerd-root-directory");
  if (criDockerdRoot && !criDockerdRoot.startsWith("/")) {
    throw new ConfigError("cri-dockerd-root-directory", `"${criDockerdRoot}" must be an absolute path (or "" for none)`);
  }
  if (criDockerdRoot && criDockerdRoot.replace(/\/+$/, "") === root.replace(/\/+$/, "")) {
    throw new ConfigError("cri-dockerd-root-directory", `"${criDockerdRoot}" is also --root-directory; give cridock a root of its own`);
  }
  const cniBinDirs = get("cni-bin-dir").split(",").map((d) => d.trim()).filter(Boolean);
  if (cniBinDirs.length === 0 || cniBinDirs.some((d) => !d.startsWith("/"))) {
    throw new ConfigError("cni-bin-dir", `"${get("cni-bin-dir")}" must be a comma-separated list of absolute paths`);
  }
  const plugin = get("network-plugin");
  let networkPlugin: NetworkPlugin;
  if (plugin === "cni") networkPlugin = "cni";
  else if (plugin === "no-op" || plugin === "") networkPlugin = "no-op";
  else throw new ConfigError("network-plugin", `"${plugin}" is not one of cni, no-op`);
  const logLevel = get("log-level");
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError("log-level", `"${logLevel}" is not one of ${LOG_LEVELS.join(", ")}`);
  }
  const image = get("pod-infra-container-image");
  if (!image || /\s/.test(image)) throw new ConfigError("pod-infra-container-image", `"${image}" is not an image reference`);
  try {
    parseSize(get("docker-log-max-size"));
  } catch (err) {
    throw new ConfigError("docker-log-max-size", (err as Error).message);
  }
  const restrictOom = get("restrict-oom-score-adj");
  if (restrictOom !== "auto" && restrictOom !== "true" && restrictOom !== "false") {
    throw new ConfigError("restrict-oom-score-adj", `"${restrictOom}" is not one of auto, true, false`);
  }
  const reregister = get("oci-layer-reregister");
  if (reregister !== "true" && reregister !== "false") throw new ConfigError("oci-layer-reregister", `"${reregister}" is not one of true, false`);
  const podCidr = get("pod-cidr");
  if (podCidr && !/^[0-9a-fA-F.:]+\/\d{1,3}$/.test(podCidr)) throw new ConfigError("pod-cidr", `"${podCidr}" is not a CIDR`);
  const { host: streamingHost, port: streamingPort } = parseBindAddr(get("streaming-bind-addr"));

  return {
    kind: "config",
    config: {
      ...listenEndpoint(get("container-runtime-endpoint")),
      metrics: parseMetricsAddr(get("metrics-bind-addr")),
      dockerEndpoint: (socketPathFromEndpoint("docker-endpoint", get("docker-endpoint")), get("docker-endpoint")),
      podInfraContainerImage: image,
      networkPlugin,
      cniConfDir: get("cni-conf-dir"),
      cniBinDirs,
      cniCacheDir: get("cni-cache-dir"),
      networkPluginMtu: intFlag("network-plugin-mtu", get("network-plugin-mtu"), 0, 65535),
      podCidr,
      streamingHost,
      streamingPort,
      streamingStallTimeoutMs: durationFlag("streaming-stall-timeout", get("streaming-stall-timeout")),
      runtimeRequestTimeoutMs: durationFlag("runtime-request-timeout", get("runtime-request-timeout")),
      imagePullProgressDeadlineMs: durationFlag("image-pull-progress-deadline", get("image-pull-progress-deadline")),
      rootDirectory: root,
      criDockerdRootDirectory: criDockerdRoot,
      dockerLogMaxSize: get("docker-log-max-size"),
      dockerLogMaxFile: intFlag("docker-log-max-file", get("docker-log-max-file"), 1, 100),
      shutdownGraceMs: durationFlag("shutdown-grace-period", get("shutdown-grace-period")),
      restrictOomScoreAdj: restrictOom === "auto" ? "auto" : restrictOom === "true",
      ociLayerReregister: reregister === "true",
      logLevel: logLevel as LogLevel,
    },
  };
}
