/**
 * What cridock keeps about a sandbox beyond Docker's labels: the checkpoint
 * at <root>/sandbox/<id>.json. It is written before each step that changes
 * the outside world (start, netns pin, CNI ADD), so after a crash recovery
 * knows what may have happened and how to undo it.
 */
import type { ContainerInspect, ContainerSummary } from "../../docker/types.ts";
import { fromDockerLabels } from "../labels.ts";
import { parseName } from "../naming.ts";
import type { SandboxSpec } from "./spec.ts";
import type { NamespaceMode } from "./view.ts";

/** creating: RunPodSandbox has not returned yet; ready: it succeeded; stopped: StopPodSandbox ran. */
export type SandboxPhase = "creating" | "ready" | "stopped";
/** attaching: CNI ADD may have run (partly); detached: DEL succeeded, never to be repeated. */
export type NetworkPhase = "none" | "attaching" | "attached" | "detached";

export interface SandboxRecord {
  id: string;
  spec: SandboxSpec;
  /** Nanoseconds since the epoch, decimal (JSON has no bigint). */
  createdAt: string;
  phase: SandboxPhase;
  hostNetwork: boolean;
  networkKind: "cni" | "docker";
  /** Persistent netns handle; "" until pinned. */
  netnsPath: string;
  network: { phase: NetworkPhase; name: string; ips: string[]; result: unknown };
  /** Pod-level resources last sent by UpdatePodSandboxResources (recorded; kubelet owns the pod cgroup). */
  podResources?: PodResourcesRecord;
  /** Set when the sandbox was created by cri-dockerd and taken over at start-up. */
  adoptedFrom?: "cri-dockerd";
}

/** LinuxContainerResources as JSON: integers as decimal strings (JSON has no int64). */
export type LinuxResourcesRecord = Record<string, string | Record<string, string> | { pageSize: string; limit: string }[]>;

export interface PodResourcesRecord {
  overhead: LinuxResourcesRecord | null;
  resources: LinuxResourcesRecord | null;
  /** ns since the epoch, decimal. */
  updatedAt: string;
}

export interface SandboxMetadata {
  name: string;
  namespace: string;
  uid: string;
  attempt: number;
}

export interface SandboxNamespaces {
  network: NamespaceMode;
  pid: NamespaceMode;
  ipc: NamespaceMode;
  targetId: string;
}

/** One ListPodSandbox item, as plain data. */
export interface SandboxSummary {
  id: string;
  metadata: SandboxMetadata;
  ready: boolean;
  createdAt: bigint;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtimeHandler: string;
}

/** PodSandboxStatus, as plain data. */
export interface SandboxStatusInfo extends SandboxSummary {
  ips: string[];
  namespaces: SandboxNamespaces;
  /** Verbose details (pid, netns, CNI result, config). */
  info: Record<string, unknown>;
}

export interface SandboxListFilter {
  id?: string;
  ready?: boolean;
  labelSelector?: Record<string, string>;
}

/** Docker's RFC 3339 time with nanoseconds as nanoseconds since the epoch; 0 for Docker's zero time. */
export function dockerTimeToNanos(text: string | undefined): bigint {
  if (!text || text.startsWith("0001-01-01")) return 0n;
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) {
    const ms = Date.parse(text);
    return Number.isNaN(ms) ? 0n : BigInt(ms) * 1_000_000n;
  }
  const seconds = BigInt(Date.parse(`${m[1]}${m[3]}`) / 1000);
  const fraction = BigInt((m[2] ?? "").padEnd(9, "0"));
  return seconds * 1_000_000_000n + fraction;
}

/** Whether kubelet may treat the sandbox as READY: pause running and its network (if any) set up. */
export function isReady(record: SandboxRecord | undefined, running: boolean): boolean {
  if (!running) return false;
  if (!record) return true;
  if (record.phase !== "ready") return false;
  return record.hostNetwork || (record.network.phase === "attached" && record.network.ips.length > 0);
}

/** Metadata, labels and annotations of a sandbox from its record, else from the container. */
export function describe(
  record: SandboxRecord | undefined,
  container: Pick<ContainerSummary, "Names" | "Labels"> | undefined,
): Pick<SandboxSummary, "metadata" | "labels" | "annotations" | "runtimeHandler"> {
  if (record) {
    const { spec } = record;
    return {
      metadata: { ...spec.metadata },
      labels: { ...spec.labels },
      annotations: { ...spec.annotations },
      runtimeHandler: spec.runtimeHandler,
    };
  }
  const parsed = parseName(container?.Names?.[0] ?? "");
  const split = fromDockerLabels(container?.Labels, true);
  return {
    metadata: parsed
      ? { name: parsed.pod.name, namespace: parsed.pod.namespace, uid: parsed.pod.uid, attempt: parsed.attempt }
      : { name: "", namespace: "", uid: "", attempt: 0 },
    labels: split.labels,
    annotations: split.annotations,
    runtimeHandler: "",
  };
}

/** Namespace modes of a sandbox without a record, read back from Docker. */
export function namespacesOf(record: SandboxRecord | undefined, inspect: ContainerInspect | undefined): SandboxNamespaces {
  if (record) return { ...record.spec.namespaces };
  const host = inspect?.HostConfig;
  return {
    network: host?.NetworkMode === "host" ? "node" : "pod",
    pid: host?.PidMode === "host" ? "node" : "pod",
    ipc: host?.IpcMode === "host" ? "node" : "pod",
    targetId: "",
  };
}
