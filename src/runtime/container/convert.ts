/**
 * Docker containers → the plain ContainerInfo / ContainerSummaryInfo the CRI
 * layer reports. What Docker cannot hold as it was given (the image reference
 * the user wrote, the mounts before symlinks were resolved) travels in
 * cridock's own labels, which never reach CRI responses.
 */
import type { ContainerInspect, ContainerSummary } from "../../docker/types.ts";
import { dockerTimeOrZero } from "../../docker/time.ts";
import type { ContainerInfo, ContainerStateName, ContainerSummaryInfo, MountSpec } from "./spec.ts";
import { CRIDOCK_PREFIX, fromDockerLabels, LOG_PATH_LABEL, SANDBOX_ID_LABEL } from "../labels.ts";
import { parseName } from "../naming.ts";
import { isUnifiedKey } from "../../cgroup-unified-keys.ts";
import { resourcesFromHostConfig } from "./resources.ts";
import { imageRefOfMount } from "./image-mounts.ts";
import { readKernelFile } from "../../stats/kernel-file.ts";

/** The image as the user named it in CreateContainer. */
export const IMAGE_LABEL = `${CRIDOCK_PREFIX}image`;
/** The CRI mounts as requested (JSON). */
export const MOUNTS_LABEL = `${CRIDOCK_PREFIX}mounts`;
/** Container name and attempt, for names that do not parse (kept apart from the Docker name). */
export const NAME_LABEL = `${CRIDOCK_PREFIX}name`;
export const ATTEMPT_LABEL = `${CRIDOCK_PREFIX}attempt`;
/**
 * The `unified` keys of CreateContainer (JSON): StartContainer writes those
 * without a Docker field into the container's cgroup (Docker keeps no OCI
 * `unified` of its own), and ContainerStatus reads them all back.
 */
export const UNIFIED_LABEL = `${CRIDOCK_PREFIX}unified`;

/** The unified keys kept in a container's labels; keys or values that are not plain are dropped. */
export function unifiedFromLabels(labels: Record<string, string> | null | undefined): Record<string, string> {
  const text = labels?.[UNIFIED_LABEL];
  if (!text) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return {};
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return {};
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(parsed)) if (isUnifiedKey(key) && typeof value === "string") out[key] = value;
  return out;
}

export function stateOf(dockerState: string, exitCode = 0): ContainerStateName {
  switch (dockerState) {
    case "created":
      // A start that failed leaves the container "created" with an exit code.
      return exitCode !== 0 ? "exited" : "created";
    case "running":
    case "paused":
    case "restarting":
      return "running";
    case "exited":
    case "dead":
      return "exited";
    default:
      return "unknown";
  }
}

function identity(dockerName: string, labels: Record<string, string>) {
  const parsed = parseName(dockerName);
  return {
    name: labels[NAME_LABEL] ?? parsed?.containerName ?? dockerName.replace(/^\//, ""),
    attempt: Number(labels[ATTEMPT_LABEL] ?? parsed?.attempt ?? 0),
  };
}

/**
 * A ListContainers item. Docker's list cannot tell a container whose start
 * failed from one never started (both "created"), so the caller says which
 * (`startFailed`, from an inspect or from its own failed start).
 */
export function summaryInfo(c: ContainerSummary, startFailed = false): ContainerSummaryInfo {
  const docker = c.Labels ?? {};
  const split = fromDockerLabels(docker, false);
  return {
    id: c.Id,
    sandboxId: docker[SANDBOX_ID_LABEL] ?? "",
    ...identity(c.Names[0] ?? "", docker),
    image: docker[IMAGE_LABEL] ?? c.Image,
    imageId: c.ImageID,
    state: stateOf(c.State, startFailed ? 1 : 0),
    createdAt: BigInt(c.Created) * 1_000_000_000n,
    labels: split.labels,
    annotations: split.annotations,
  };
}

export function reasonOf(c: ContainerInspect): { reason: string; message: string } {
  const state = c.State;
  const message = state.Error ?? "";
  if (state.Running || state.Status === "running" || state.Status === "paused") return { reason: "", message: "" };
  const neverStarted = dockerTimeOrZero(state.StartedAt) === 0n;
  if (state.Status === "created" && state.ExitCode === 0) return { reason: "", message: "" };
  if (neverStarted && state.ExitCode !== 0) return { reason: "ContainerCannotRun", message };
  if (state.OOMKilled) return { reason: "OOMKilled", message };
  if (state.ExitCode === 0) return { reason: "Completed", message };
  return { reason: "Error", message };
}

export function parseMountsLabel(text: string | undefined): MountSpec[] {
  if (!text) return [];
  try {
    const parsed = JSON.parse(text) as MountSpec[];
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

/**
 * Whether Docker failed to start the container: it stays "created" with
 * State.Error and an exit code (126 not executable, 127 not found, 128
 * otherwise). CRI reports it exited, as dockershim did, so kubelet sees the
 * attempt end and backs off before the next one.
 */
export function startFailed(state: Pick<ContainerInspect["State"], "Status" | "ExitCode">): boolean {
  return state.Status === "created" && state.ExitCode !== 0;
}

export function containerInfo(c: ContainerInspect): ContainerInfo {
  const docker = c.Config.Labels ?? {};
  const split = fromDockerLabels(docker, false);
  const { reason, message } = reasonOf(c);
  const state = stateOf(c.State.Status, c.State.ExitCode);
  const createdAt = dockerTimeOrZero(c.Created);
  // Docker records no time for a failed start: the attempt began and ended at
  // creation as far as kubelet is concerned. kubelet's backoff counts from
  // finished_at; at 0 it never waited and recreated the container at once.
  const failed = startFailed(c.State);
  return {
    id: c.Id,
    sandboxId: docker[SANDBOX_ID_LABEL] ?? "",
    ...identity(c.Name, docker),
    image: docker[IMAGE_LABEL] ?? c.Config.Image ?? c.Image,
    imageId: c.Image,
    state,
    createdAt,
    startedAt: dockerTimeOrZero(c.State.StartedAt) || (failed ? createdAt : 0n),
    finishedAt: dockerTimeOrZero(c.State.FinishedAt) || (failed ? createdAt : 0n),
    exitCode: state === "exited" ? c.State.ExitCode : 0,
    reason,
    message,
    labels: split.labels,
    annotations: split.annotations,
    mounts: parseMountsLabel(docker[MOUNTS_LABEL]).map((m) => ({ ...m, imageRef: m.image ? imageRefOfMount(c.HostConfig.Mounts, m.containerPath) : "" })),
    logPath: docker[LOG_PATH_LABEL] ?? "",
    resources: resourcesFromHostConfig(c.HostConfig),
    stopSignal: c.Config.StopSignal ?? "",
    info: {
      pid: c.State.Pid,
      dockerName: c.Name.replace(/^\//, ""),
      dockerState: c.State.Status,
      privileged: c.HostConfig.Privileged ?? false,
      user: c.Config.User ?? "",
      entrypoint: c.Config.Entrypoint ?? null,
      cmd: c.Config.Cmd ?? null,
      networkMode: c.HostConfig.NetworkMode ?? "",
      pidMode: c.HostConfig.PidMode ?? "",
      ipcMode: c.HostConfig.IpcMode ?? "",
      cgroupParent: c.HostConfig.CgroupParent ?? "",
      securityOpt: (c.HostConfig.SecurityOpt ?? []).map((o) => (o.startsWith("seccomp={") ? "seccomp=<localhost profile>" : o)),
      dockerLogPath: c.LogPath,
    },
  };
}

/** The identity of a running process, from /proc (undefined when it is gone). */
export async function processUser(pid: number): Promise<ContainerInfo["user"]> {
  if (pid <= 0) return undefined;
  const text = await readKernelFile(`/proc/${pid}/status`).catch(() => undefined);
  if (!text) return undefined;
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, "m").exec(text)?.[1]?.trim().split(/\s+/) ?? [];
  const uid = field("Uid")[0];
  const gid = field("Gid")[0];
  if (uid === undefined || gid === undefined) return undefined;
  return {
    uid: BigInt(uid),
    gid: BigInt(gid),
    supplementalGroups: field("Groups").filter(Boolean).map((g) => BigInt(g)),
  };
}
