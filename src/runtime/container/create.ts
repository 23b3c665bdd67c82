/**
 * CreateContainer's request → Docker's create body: validation first (so a
 * bad request creates nothing), then the translation.
 *
 * Containers join the pause container's network and IPC namespaces
 * (`container:<sandbox>`), and its PID namespace per the PID option. Nothing
 * Docker refuses under a `container:` network mode (hostname, DNS, ports,
 * net sysctls) is set here: those live on the pause container.
 */
import { join, normalize } from "node:path";
import type { ContainerCreateBody, HostConfig } from "../../docker/types.ts";
import { invalidArgument } from "../../errors.ts";
import type { ContainerSpec } from "./spec.ts";
import { ATTEMPT_LABEL, IMAGE_LABEL, MOUNTS_LABEL, NAME_LABEL, UNIFIED_LABEL } from "./convert.ts";
import { checkRequestLabels, LOG_PATH_LABEL, ROOT_LABEL, SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL, toDockerLabels } from "../labels.ts";
import { deviceMappings, dockerMountsFor, validateDevices, validateMounts } from "./mounts.ts";
import { invalidNamePart } from "../naming.ts";
import { hostResources, validateResources } from "./resources.ts";
import { clampOomScore, type OomScorePolicy } from "./oom-score.ts";
import type { SandboxView } from "../sandbox/view.ts";
import { securityHostConfig, validateSecurity, type HostSecurity, hostSecurity } from "./security.ts";
import { dockerImageMount, validateImageMount } from "./image-mounts.ts";
import { cdiDeviceRequests, validateCdiDevices } from "./cdi.ts";
import type { CgroupVersion } from "../../stats/cgroups.ts";

const SIGNAL = /^SIG[A-Z0-9]+([+-]\d+)?$/;

export interface CreateOptions {
  /** Docker's own json-file copy of the logs is bounded by these. */
  logMaxSize: string;
  logMaxFile: number;
  host?: HostSecurity;
  /** Whether (and to what) oom_score_adj is clamped on this host; undefined: as asked. */
  oomScore?: OomScorePolicy;
  /** cridock's root directory, labelled on each container so that another cridock on the engine does not list it. */
  rootDirectory?: string;
}

/** Everything that can be checked without dockerd; throws INVALID_ARGUMENT / UNIMPLEMENTED. */
export function validateSpec(spec: ContainerSpec): void {
  if (!spec.name) throw invalidArgument("container metadata.name is required");
  // Kubernetes names are DNS labels; critest also uses upper case and long
  // names, so the check is what a cri-dockerd Docker name can carry.
  const badName = invalidNamePart(spec.name);
  if (badName) throw invalidArgument(`container name "${spec.name.slice(0, 80)}" is not a DNS-label-like name: it ${badName}`);
  if (!Number.isSafeInteger(spec.attempt) || spec.attempt < 0) throw invalidArgument(`attempt ${spec.attempt} is invalid`);
  if (!spec.image) throw invalidArgument(`container ${spec.name}: image.image is required`);
  checkRequestLabels(`container ${spec.name}`, spec.labels, spec.annotations);
  if (spec.logPath) checkLogPath(spec.logPath);
  for (const env of spec.envs) {
    if (!env.key || env.key.includes("=") || env.key.includes("\0")) {
      throw invalidArgument(`environment variable name "${env.key}" is empty or contains "="`);
    }
  }
  if (spec.workingDir && !spec.workingDir.startsWith("/")) {
    throw invalidArgument(`working_dir "${spec.workingDir}" must be an absolute path`);
  }
  if (spec.stopSignal && !SIGNAL.test(spec.stopSignal)) throw invalidArgument(`stop signal "${spec.stopSignal}" is not a signal name`);
  validateCdiDevices(spec.cdiDevices);
  validateMounts(spec.mounts);
  for (const m of spec.mounts) if (m.image) validateImageMount(m);
  validateDevices(spec.devices);
  if (spec.security) validateSecurity(spec.security);
  if (spec.resources) validateResources(spec.resources);
}

/** log_path must stay inside log_directory. */
export function checkLogPath(logPath: string): void {
  if (logPath.startsWith("/")) throw invalidArgument(`log_path "${logPath}" must be relative to the sandbox's log_directory`);
  const normalized = normalize(logPath);
  if (normalized === ".." || normalized.startsWith("../") || logPath.split("/").includes("..")) {
    throw invalidArgument(`log_path "${logPath}" escapes the sandbox's log_directory`);
  }
  if (logPath.includes("\0")) throw invalidArgument("log_path contains a NUL byte");
}

/** The full CRI log path, or "" when the sandbox or the container names none. */
export function fullLogPath(view: SandboxView, spec: ContainerSpec): string {
  if (!view.logDirectory || !spec.logPath) return "";
  return join(view.logDirectory, spec.logPath);
}

export function pidMode(spec: ContainerSpec, view: SandboxView, targetId: string): string | undefined {
  switch (spec.security?.pidMode ?? "pod") {
    case "pod":
      return `container:${view.id}`;
    case "node":
      return "host";
    case "target":
      return `container:${targetId}`;
    case "container":
      return undefined;
  }
}

/** What CreateContainer learned from the engine and the images before building the body. */
export interface CreateContext {
  apiVersion: string;
  /** The engine relabels bind mounts for SELinux. */
  relabels: boolean;
  /** Image volume reference → the image id it resolved to. */
  imageMountIds: ReadonlyMap<string, string>;
  /** Config.User decided beforehand (supplemental_groups_policy Strict); else from the security context. */
  user?: string;
  /** The node's cgroup version, learnt when the request has `unified` keys (and their controllers checked on v2). */
  cgroupVersion?: CgroupVersion;
}

export async function createBody(
  spec: ContainerSpec,
  view: SandboxView,
  imageId: string,
  targetId: string,
  options: CreateOptions,
  engine: CreateContext,
): Promise<ContainerCreateBody> {
  const logPath = fullLogPath(view, spec);
  const mounts = await dockerMountsFor(spec.mounts, engine.apiVersion, engine.relabels);
  for (const m of spec.mounts) {
    if (!m.image) continue;
    const id = engine.imageMountIds.get(m.image);
    if (!id) throw new Error(`image volume ${m.image} was not resolved before the create body was built`);
    mounts.mounts.push(dockerImageMount(m, id));
  }
  const security = spec.security ? await securityHostConfig(spec.security, options.host ?? hostSecurity) : undefined;
  const sandboxMode = `container:${view.id}`;
  const host: HostConfig = {
    ...hostResources(spec.resources, engine.cgroupVersion),
    ...security?.host,
    NetworkMode: sandboxMode,
    IpcMode: sandboxMode,
    PidMode: pidMode(spec, view, targetId),
    UTSMode: view.hostNetwork ? "host" : undefined,
    CgroupParent: view.cgroupParent || undefined,
    Binds: mounts.binds,
    Mounts: mounts.mounts.length ? mounts.mounts : undefined,
    Devices: deviceMappings(spec.devices),
    DeviceRequests: spec.cdiDevices.length ? cdiDeviceRequests(spec.cdiDevices) : undefined,
    RestartPolicy: { Name: "no" },
    LogConfig: { Type: "json-file", Config: { "max-size": options.logMaxSize, "max-file": String(options.logMaxFile) } },
  };
  // Docker gives 0 when none is set; a restricted host may need more than asked (oom-score.ts).
  const oomScore = clampOomScore(Number(spec.resources?.oomScoreAdj ?? 0n), options.oomScore);
  if (oomScore !== 0) host.OomScoreAdj = oomScore;
  else delete host.OomScoreAdj;
  const internal: Record<string, string> = {
    [TYPE_LABEL]: TYPE_CONTAINER,
    [SANDBOX_ID_LABEL]: view.id,
    [LOG_PATH_LABEL]: logPath,
    // What ContainerStatus reports as the image: the pod's name for it (spec.ts).
    [IMAGE_LABEL]: spec.userImage || spec.image,
    [NAME_LABEL]: spec.name,
    [ATTEMPT_LABEL]: String(spec.attempt),
  };
  if (spec.mounts.length > 0) internal[MOUNTS_LABEL] = JSON.stringify(spec.mounts);
  const unified = spec.resources?.unified ?? {};
  if (Object.keys(unified).length > 0) internal[UNIFIED_LABEL] = JSON.stringify(unified);
  if (options.rootDirectory) internal[ROOT_LABEL] = options.rootDirectory;
  const body: ContainerCreateBody = {
    Image: imageId,
    Env: spec.envs.map((e) => `${e.key}=${e.value}`),
    WorkingDir: spec.workingDir || undefined,
    User: engine.user ?? security?.user,
    Tty: spec.tty,
    OpenStdin: spec.stdin,
    StdinOnce: spec.stdinOnce,
    AttachStdin: spec.stdin,
    AttachStdout: false,
    AttachStderr: false,
    StopSignal: spec.stopSignal || undefined,
    // Kubernetes probes containers itself; an image HEALTHCHECK would only cost CPU.
    Healthcheck: { Test: ["NONE"] },
    Labels: toDockerLabels(spec.labels, spec.annotations, internal),
    HostConfig: host,
  };
  // CRI command replaces the image's ENTRYPOINT (and then ignores its CMD), args replace CMD.
  if (spec.command.length > 0) {
    body.Entrypoint = spec.command;
    body.Cmd = spec.args;
  } else if (spec.args.length > 0) {
    body.Cmd = spec.args;
  }
  return body;
}
