/**
 * CreateContainer, StartContainer, StopContainer, RemoveContainer,
 * ContainerStatus, ListContainers, UpdateContainerResources,
 * ReopenContainerLog and CheckpointContainer: protobuf shapes ⇄ the plain container descriptions of
 * runtime/container/spec.ts.
 */
import { mountMappings, usernsFromCri } from "./userns-options.ts";
import type { CallContext, HandlerTable } from "./handlers.ts";
import { criRoot, type EncodedMessage } from "./proto.ts";
import { RepeatedFieldEncoder } from "./repeated-encoding.ts";
import { sendInBatches } from "./list-stream.ts";
import type * as cri from "./proto-types.ts";
import { ContainerState, MountPropagation, NamespaceMode, ProfileType, Signal, SupplementalGroupsPolicy } from "./proto-types.ts";
import { dockerSignalName, signalFromName } from "./signal-names.ts";
import { invalidArgument } from "../errors.ts";
import type { ContainerManager } from "../runtime/container/manager.ts";
import type * as spec from "../runtime/container/spec.ts";
import { EMPTY_RESOURCES } from "../runtime/container/resources.ts";

export interface ContainerRpcDeps {
  containers: ContainerManager;
}

const PROPAGATION: Record<number, spec.Propagation> = {
  [MountPropagation.PROPAGATION_PRIVATE]: "private",
  [MountPropagation.PROPAGATION_HOST_TO_CONTAINER]: "host-to-container",
  [MountPropagation.PROPAGATION_BIDIRECTIONAL]: "bidirectional",
};
const PROPAGATION_ENUM = Object.fromEntries(Object.entries(PROPAGATION).map(([k, v]) => [v, Number(k)])) as Record<
  spec.Propagation,
  cri.MountPropagation
>;
const NAMESPACE: Record<number, spec.NamespaceMode> = {
  [NamespaceMode.POD]: "pod",
  [NamespaceMode.CONTAINER]: "container",
  [NamespaceMode.NODE]: "node",
  [NamespaceMode.TARGET]: "target",
};
const STATE: Record<spec.ContainerStateName, cri.ContainerState> = {
  created: ContainerState.CONTAINER_CREATED,
  running: ContainerState.CONTAINER_RUNNING,
  exited: ContainerState.CONTAINER_EXITED,
  unknown: ContainerState.CONTAINER_UNKNOWN,
};
const STATE_NAME = Object.fromEntries(Object.entries(STATE).map(([k, v]) => [v, k])) as Record<number, spec.ContainerStateName>;

function profile(p: cri.SecurityProfile | null | undefined, legacy: string): spec.SecurityProfile | undefined {
  if (p) {
    switch (p.profileType) {
      case ProfileType.RuntimeDefault:
        return { kind: "runtime-default", localhostRef: "" };
      case ProfileType.Unconfined:
        return { kind: "unconfined", localhostRef: "" };
      case ProfileType.Localhost:
        return { kind: "localhost", localhostRef: p.localhostRef ?? "" };
      default:
        throw invalidArgument(`unknown security profile type ${p.profileType}`);
    }
  }
  // The deprecated string fields: "runtime/default", "docker/default", "unconfined", "localhost/<ref>".
  if (!legacy) return undefined;
  if (legacy === "runtime/default" || legacy === "docker/default") return { kind: "runtime-default", localhostRef: "" };
  if (legacy === "unconfined") return { kind: "unconfined", localhostRef: "" };
  if (legacy.startsWith("localhost/")) return { kind: "localhost", localhostRef: legacy.slice("localhost/".length) };
  throw invalidArgument(`security profile "${legacy}" is not runtime/default, unconfined or localhost/<ref>`);
}

export function resourcesFromCri(r: cri.LinuxContainerResources | null | undefined): spec.ResourceSpec | undefined {
  if (!r) return undefined;
  return {
    cpuPeriod: r.cpuPeriod ?? 0n,
    cpuQuota: r.cpuQuota ?? 0n,
    cpuShares: r.cpuShares ?? 0n,
    memoryLimitInBytes: r.memoryLimitInBytes ?? 0n,
    memorySwapLimitInBytes: r.memorySwapLimitInBytes ?? 0n,
    oomScoreAdj: r.oomScoreAdj ?? 0n,
    cpusetCpus: r.cpusetCpus ?? "",
    cpusetMems: r.cpusetMems ?? "",
    hugepageLimits: (r.hugepageLimits ?? []).map((h) => ({ pageSize: h.pageSize ?? "", limit: h.limit ?? 0n })),
    unified: { ...(r.unified ?? {}) },
  };
}

function securityFromCri(sc: cri.LinuxContainerSecurityContext | null | undefined): spec.SecuritySpec | undefined {
  if (!sc) return undefined;
  const ns = sc.namespaceOptions;
  const selinux = sc.selinuxOptions;
  return {
    privileged: sc.privileged ?? false,
    capAdd: sc.capabilities?.addCapabilities ?? [],
    capDrop: sc.capabilities?.dropCapabilities ?? [],
    capAddAmbient: sc.capabilities?.addAmbientCapabilities ?? [],
    pidMode: NAMESPACE[ns?.pid ?? NamespaceMode.POD] ?? "pod",
    targetId: ns?.targetId ?? "",
    userns: usernsFromCri(ns?.usernsOptions, "container"),
    runAsUser: sc.runAsUser ? (sc.runAsUser.value ?? 0n) : undefined,
    runAsGroup: sc.runAsGroup ? (sc.runAsGroup.value ?? 0n) : undefined,
    runAsUsername: sc.runAsUsername ?? "",
    readonlyRootfs: sc.readonlyRootfs ?? false,
    supplementalGroups: sc.supplementalGroups ?? [],
    supplementalGroupsStrict: sc.supplementalGroupsPolicy === SupplementalGroupsPolicy.Strict,
    noNewPrivs: sc.noNewPrivs ?? false,
    maskedPaths: sc.maskedPaths ?? [],
    readonlyPaths: sc.readonlyPaths ?? [],
    seccomp: profile(sc.seccomp, sc.seccompProfilePath ?? ""),
    apparmor: profile(sc.apparmor, sc.apparmorProfile ?? ""),
    selinux:
      selinux && (selinux.user || selinux.role || selinux.type || selinux.level)
        ? { user: selinux.user ?? "", role: selinux.role ?? "", type: selinux.type ?? "", level: selinux.level ?? "" }
        : undefined,
  };
}

/** Docker's name for the stop signal kubelet asks; "" for the image's own. A number the enum lacks is refused, not dropped. */
function stopSignalFromCri(value: number): string {
  if (value === Signal.SIGNAL_RUNTIME_DEFAULT) return "";
  const name = dockerSignalName(value);
  if (!name) throw invalidArgument(`stop_signal ${value} is not a value of CRI's Signal enum`);
  return name;
}

export function specFromCri(config: cri.ContainerConfig): spec.ContainerSpec {
  const envs = (config.envs ?? []).map((kv) => ({
    key: kv.key ?? "",
    value: typeof kv.value === "string" ? kv.value : Buffer.from(kv.value ?? new Uint8Array()).toString("utf8"),
  }));
  return {
    name: config.metadata?.name ?? "",
    attempt: config.metadata?.attempt ?? 0,
    image: config.image?.image ?? "",
    userImage: config.image?.userSpecifiedImage ?? "",
    command: config.command ?? [],
    args: config.args ?? [],
    workingDir: config.workingDir ?? "",
    envs,
    mounts: (config.mounts ?? []).map((m) => ({
      containerPath: m.containerPath ?? "",
      hostPath: m.hostPath ?? "",
      readonly: m.readonly ?? false,
      selinuxRelabel: m.selinuxRelabel ?? false,
      propagation: PROPAGATION[m.propagation ?? 0] ?? "private",
      recursiveReadOnly: m.recursiveReadOnly ?? false,
      image: m.image?.image ?? "",
      imageSubPath: m.imageSubPath ?? "",
      idMappings: mountMappings(m.uidMappings, m.gidMappings),
      // Kept only when asked: the mounts label stays as it was for every other mount.
      ...(m.mountOptions?.length ? { mountOptions: [...m.mountOptions] } : {}),
    })),
    devices: (config.devices ?? []).map((d) => ({
      containerPath: d.containerPath ?? "",
      hostPath: d.hostPath ?? "",
      permissions: d.permissions ?? "",
    })),
    cdiDevices: (config.CDIDevices ?? []).map((d) => d.name ?? ""),
    labels: { ...(config.labels ?? {}) },
    annotations: { ...(config.annotations ?? {}) },
    logPath: config.logPath ?? "",
    stdin: config.stdin ?? false,
    stdinOnce: config.stdinOnce ?? false,
    tty: config.tty ?? false,
    stopSignal: stopSignalFromCri(config.stopSignal ?? Signal.SIGNAL_RUNTIME_DEFAULT),
    resources: resourcesFromCri(config.linux?.resources),
    security: securityFromCri(config.linux?.securityContext),
  };
}

function resourcesToCri(r: spec.ResourceSpec): cri.LinuxContainerResources {
  return {
    cpuPeriod: r.cpuPeriod,
    cpuQuota: r.cpuQuota,
    cpuShares: r.cpuShares,
    memoryLimitInBytes: r.memoryLimitInBytes,
    memorySwapLimitInBytes: r.memorySwapLimitInBytes,
    oomScoreAdj: r.oomScoreAdj,
    cpusetCpus: r.cpusetCpus,
    cpusetMems: r.cpusetMems,
    unified: { ...r.unified },
  };
}

function filterFromCri(f: cri.ContainerFilter | null | undefined): spec.ContainerFilterSpec {
  return {
    id: f?.id ?? "",
    state: f?.state ? STATE_NAME[f.state.state ?? 0] : undefined,
    sandboxId: f?.podSandboxId ?? "",
    labelSelector: f?.labelSelector ?? {},
  };
}

function containerToCri(c: spec.ContainerSummaryInfo): cri.Container {
  return {
    id: c.id,
    podSandboxId: c.sandboxId,
    metadata: { name: c.name, attempt: c.attempt },
    image: { image: c.image },
    imageRef: c.imageId,
    imageId: c.imageId,
    state: STATE[c.state],
    createdAt: c.createdAt,
    labels: c.labels,
    annotations: c.annotations,
  };
}

/** ContainerStatus.status (also sent in PodSandboxStatus and GetContainerEvents). */
export function statusToCri(c: spec.ContainerInfo): cri.ContainerStatus {
  return {
    ...containerToCri(c),
    startedAt: c.startedAt,
    finishedAt: c.finishedAt,
    exitCode: c.exitCode,
    reason: c.reason,
    message: c.message,
    mounts: c.mounts.map((m) => ({
      containerPath: m.containerPath,
      hostPath: m.hostPath,
      readonly: m.readonly,
      selinuxRelabel: m.selinuxRelabel,
      propagation: PROPAGATION_ENUM[m.propagation] ?? MountPropagation.PROPAGATION_PRIVATE,
      recursiveReadOnly: m.recursiveReadOnly,
      // image_ref (ImageSpec tag 20): the id the volume was mounted from, as PullImage returned it.
      image: m.image ? { image: m.image, ...(m.imageRef ? { imageRef: m.imageRef } : {}) } : null,
      imageSubPath: m.imageSubPath ?? "",
      // From the container's label: only strings go on the wire.
      mountOptions: Array.isArray(m.mountOptions) ? m.mountOptions.filter((o) => typeof o === "string") : [],
    })),
    logPath: c.logPath,
    resources: { linux: resourcesToCri(c.resources) },
    user: c.user ? { linux: { uid: c.user.uid, gid: c.user.gid, supplementalGroups: c.user.supplementalGroups } } : null,
    // Docker's name (the request's, or the image's); one the enum lacks reads as the runtime's default.
    stopSignal: signalFromName(c.stopSignal) ?? Signal.SIGNAL_RUNTIME_DEFAULT,
  };
}

export function containerRpcs({ containers }: ContainerRpcDeps): HandlerTable {
  // kubelet relists every second; unchanged containers keep their encoding.
  const listEncoder = new RepeatedFieldEncoder<spec.ContainerSummaryInfo>(
    criRoot().lookupType("runtime.v1.ListContainersResponse"),
    "containers",
    (c) => containerToCri(c) as unknown as Record<string, unknown>,
  );
  return {
    async CreateContainer(request: cri.CreateContainerRequest): Promise<cri.CreateContainerResponse> {
      if (!request.podSandboxId) throw invalidArgument("pod_sandbox_id is required");
      if (!request.config) throw invalidArgument("config is required");
      return { containerId: await containers.create(request.podSandboxId, specFromCri(request.config)) };
    },

    async StartContainer(request: cri.StartContainerRequest): Promise<cri.StartContainerResponse> {
      await containers.start(request.containerId ?? "");
      return {};
    },

    async StopContainer(request: cri.StopContainerRequest): Promise<cri.StopContainerResponse> {
      const timeout = request.timeout ?? 0n;
      await containers.stop(request.containerId ?? "", timeout > 0n ? Number(timeout > 31_536_000n ? 31_536_000n : timeout) : 0);
      return {};
    },

    async RemoveContainer(request: cri.RemoveContainerRequest): Promise<cri.RemoveContainerResponse> {
      await containers.remove(request.containerId ?? "");
      return {};
    },

    async ContainerStatus(request: cri.ContainerStatusRequest): Promise<cri.ContainerStatusResponse> {
      const info = await containers.status(request.containerId ?? "");
      const verbose: Record<string, string> = {};
      if (request.verbose) verbose.info = JSON.stringify(info.info);
      return { status: statusToCri(info), info: verbose };
    },

    async ListContainers(request: cri.ListContainersRequest): Promise<cri.ListContainersResponse | EncodedMessage> {
      return listEncoder.encode(await containers.list(filterFromCri(request.filter)));
    },

    async StreamContainers(request: cri.StreamContainersRequest, _ctx, send) {
      // StreamContainersResponse is laid out as ListContainersResponse (repeated Container containers = 1).
      await sendInBatches(await containers.list(filterFromCri(request.filter)), (batch) => send(listEncoder.encode(batch)));
    },

    async UpdateContainerResources(request: cri.UpdateContainerResourcesRequest): Promise<cri.UpdateContainerResourcesResponse> {
      await containers.updateResources(request.containerId ?? "", resourcesFromCri(request.linux) ?? { ...EMPTY_RESOURCES });
      return {};
    },

    async ReopenContainerLog(request: cri.ReopenContainerLogRequest): Promise<cri.ReopenContainerLogResponse> {
      await containers.reopenLog(request.containerId ?? "");
      return {};
    },

    // kubelet's POST /checkpoint/{namespace}/{pod}/{container} (KEP-2008); see runtime/container/checkpoint.ts.
    async CheckpointContainer(request: cri.CheckpointContainerRequest, ctx: CallContext): Promise<cri.CheckpointContainerResponse> {
      await containers.checkpoint(request.containerId ?? "", request.location ?? "", request.timeout ?? 0n, ctx.signal);
      return {};
    },
  };
}
