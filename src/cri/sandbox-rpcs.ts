/**
 * RunPodSandbox, StopPodSandbox, RemovePodSandbox, PodSandboxStatus,
 * ListPodSandbox, UpdatePodSandboxResources: CRI messages ⇄ the plain
 * SandboxSpec / SandboxStatusInfo of runtime/sandbox/manager.ts.
 */
import type { HandlerTable, CallContext } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { usernsFromCri } from "./userns-options.ts";
import { NamespaceMode, PodSandboxState, ProfileType, Protocol, SupplementalGroupsPolicy } from "./proto-types.ts";
import { invalidArgument } from "../errors.ts";
import { sendInBatches } from "./list-stream.ts";
import type { SandboxManager } from "../runtime/sandbox/manager.ts";
import type { SandboxSpec, SeccompSpec } from "../runtime/sandbox/spec.ts";
import type { SandboxNamespaces, SandboxStatusInfo, SandboxSummary } from "../runtime/sandbox/record.ts";
import type { ContainerInfo } from "../runtime/container/spec.ts";
import { statusToCri } from "./container-rpcs.ts";
import type { NamespaceMode as ViewNamespaceMode } from "../runtime/sandbox/view.ts";
import type { PortProtocol } from "../network/plugin.ts";
import { recordPodResources } from "../runtime/sandbox/pod-resources.ts";
import type { LinuxResourcesRecord } from "../runtime/sandbox/record.ts";

export interface SandboxRpcDeps {
  sandboxes: SandboxManager;
  /**
   * With evented PLEG on, kubelet takes a pod's container statuses from
   * PodSandboxStatus (when it carries a timestamp) instead of asking for
   * each; cridock includes them while a GetContainerEvents client listens.
   */
  sandboxContainers?: { wanted(): boolean; statuses(sandboxId: string): Promise<ContainerInfo[]> };
}

const MODE_TO_VIEW: Record<number, ViewNamespaceMode> = {
  [NamespaceMode.POD]: "pod",
  [NamespaceMode.CONTAINER]: "container",
  [NamespaceMode.NODE]: "node",
  [NamespaceMode.TARGET]: "target",
};
const VIEW_TO_MODE: Record<ViewNamespaceMode, NamespaceMode> = {
  pod: NamespaceMode.POD,
  container: NamespaceMode.CONTAINER,
  node: NamespaceMode.NODE,
  target: NamespaceMode.TARGET,
};
const PROTOCOLS: Record<number, PortProtocol> = { [Protocol.TCP]: "tcp", [Protocol.UDP]: "udp", [Protocol.SCTP]: "sctp" };

function mode(value: number | undefined, what: string): ViewNamespaceMode {
  const m = MODE_TO_VIEW[value ?? 0];
  if (!m) throw invalidArgument(`pod sandbox namespace option ${what}=${value} is not a NamespaceMode`);
  return m;
}

function seccompOf(profile: cri.SecurityProfile | null | undefined, legacyPath: string | undefined): SeccompSpec {
  if (profile) {
    if (profile.profileType === ProfileType.RuntimeDefault) return { type: "runtime-default" };
    if (profile.profileType === ProfileType.Localhost) return { type: "localhost", path: profile.localhostRef ?? "" };
    return { type: "unconfined" };
  }
  if (legacyPath === "runtime/default" || legacyPath === "docker/default") return { type: "runtime-default" };
  if (legacyPath?.startsWith("localhost/")) return { type: "localhost", path: legacyPath.slice("localhost/".length) };
  // No profile means unconfined, as kubelet and critest expect (Docker's default would be confined).
  return { type: "unconfined" };
}

/** Translates and checks the presence of required fields; runtime/ validates the values. */
export function sandboxSpecFromCri(request: cri.RunPodSandboxRequest): SandboxSpec {
  const config = request.config;
  if (!config) throw invalidArgument("RunPodSandbox needs a config");
  const md = config.metadata;
  if (!md) throw invalidArgument("pod sandbox config needs metadata (name, namespace, uid)");
  const linux = config.linux ?? undefined;
  const sc = linux?.securityContext ?? undefined;
  const ns = sc?.namespaceOptions ?? undefined;
  const dns = config.dnsConfig;
  return {
    metadata: { name: md.name ?? "", namespace: md.namespace ?? "", uid: md.uid ?? "", attempt: md.attempt ?? 0 },
    hostname: config.hostname ?? "",
    logDirectory: config.logDirectory ?? "",
    dns: dns ? { servers: [...(dns.servers ?? [])], searches: [...(dns.searches ?? [])], options: [...(dns.options ?? [])] } : undefined,
    portMappings: (config.portMappings ?? []).map((pm) => {
      const protocol = PROTOCOLS[pm.protocol ?? 0];
      if (!protocol) throw invalidArgument(`pod sandbox port mapping protocol ${pm.protocol} is not TCP, UDP or SCTP`);
      return { protocol, containerPort: pm.containerPort ?? 0, hostPort: pm.hostPort ?? 0, hostIp: pm.hostIp ?? "" };
    }),
    labels: { ...(config.labels ?? {}) },
    annotations: { ...(config.annotations ?? {}) },
    cgroupParent: linux?.cgroupParent ?? "",
    sysctls: { ...(linux?.sysctls ?? {}) },
    namespaces: {
      network: mode(ns?.network, "network"),
      pid: mode(ns?.pid, "pid"),
      ipc: mode(ns?.ipc, "ipc"),
      targetId: ns?.targetId ?? "",
    },
    userns: usernsFromCri(ns?.usernsOptions, "pod sandbox"),
    security: {
      privileged: sc?.privileged ?? false,
      readonlyRootfs: sc?.readonlyRootfs ?? false,
      runAsUser: sc?.runAsUser ? String(sc.runAsUser.value ?? 0n) : undefined,
      runAsGroup: sc?.runAsGroup ? String(sc.runAsGroup.value ?? 0n) : undefined,
      supplementalGroups: (sc?.supplementalGroups ?? []).map((g) => String(g)),
      supplementalGroupsStrict: sc?.supplementalGroupsPolicy === SupplementalGroupsPolicy.Strict,
      seccomp: seccompOf(sc?.seccomp, sc?.seccompProfilePath),
    },
    runtimeHandler: request.runtimeHandler ?? "",
  };
}

function namespaceOptions(ns: SandboxNamespaces): cri.NamespaceOption {
  return { network: VIEW_TO_MODE[ns.network], pid: VIEW_TO_MODE[ns.pid], ipc: VIEW_TO_MODE[ns.ipc], targetId: ns.targetId };
}

function toPodSandbox(s: SandboxSummary): cri.PodSandbox {
  return {
    id: s.id,
    metadata: { ...s.metadata },
    state: s.ready ? PodSandboxState.SANDBOX_READY : PodSandboxState.SANDBOX_NOTREADY,
    createdAt: s.createdAt,
    labels: s.labels,
    annotations: s.annotations,
    runtimeHandler: s.runtimeHandler,
  };
}

/** LinuxContainerResources as JSON-safe data (int64 as decimal strings). */
export function linuxResourcesRecord(r: cri.LinuxContainerResources | null | undefined): LinuxResourcesRecord | null {
  if (!r) return null;
  const n = (v: bigint | null | undefined) => (v ?? 0n).toString();
  return {
    cpuPeriod: n(r.cpuPeriod),
    cpuQuota: n(r.cpuQuota),
    cpuShares: n(r.cpuShares),
    memoryLimitInBytes: n(r.memoryLimitInBytes),
    memorySwapLimitInBytes: n(r.memorySwapLimitInBytes),
    oomScoreAdj: n(r.oomScoreAdj),
    cpusetCpus: r.cpusetCpus ?? "",
    cpusetMems: r.cpusetMems ?? "",
    hugepageLimits: (r.hugepageLimits ?? []).map((h) => ({ pageSize: h.pageSize ?? "", limit: n(h.limit) })),
    unified: { ...(r.unified ?? {}) },
  };
}

/** PodSandboxStatus.status (also sent in GetContainerEvents). */
export function sandboxStatusToCri(s: SandboxStatusInfo): cri.PodSandboxStatus {
  const [primary, ...additional] = s.ips;
  return {
    ...toPodSandbox(s),
    network: { ip: primary ?? "", additionalIps: additional.map((ip) => ({ ip })) },
    linux: { namespaces: { options: namespaceOptions(s.namespaces) } },
  };
}

export function sandboxRpcs({ sandboxes, sandboxContainers }: SandboxRpcDeps): HandlerTable {
  const listPodSandboxes = async (f: cri.PodSandboxFilter | null | undefined): Promise<cri.PodSandbox[]> => {
    const items = await sandboxes.list({
      id: f?.id || undefined,
      ready: f?.state ? f.state.state === PodSandboxState.SANDBOX_READY : undefined,
      labelSelector: f?.labelSelector ?? undefined,
    });
    return items.map(toPodSandbox);
  };

  return {
    async RunPodSandbox(request: cri.RunPodSandboxRequest, ctx: CallContext): Promise<cri.RunPodSandboxResponse> {
      const id = await sandboxes.run(sandboxSpecFromCri(request), ctx.signal);
      return { podSandboxId: id };
    },

    async StopPodSandbox(request: cri.StopPodSandboxRequest): Promise<cri.StopPodSandboxResponse> {
      await sandboxes.stop(request.podSandboxId ?? "");
      return {};
    },

    async RemovePodSandbox(request: cri.RemovePodSandboxRequest): Promise<cri.RemovePodSandboxResponse> {
      await sandboxes.remove(request.podSandboxId ?? "");
      return {};
    },

    async PodSandboxStatus(request: cri.PodSandboxStatusRequest): Promise<cri.PodSandboxStatusResponse> {
      // Stamped before anything is read, so the stamp never claims more than the statuses show.
      const timestamp = BigInt(Date.now()) * 1_000_000n;
      const s = await sandboxes.status(request.podSandboxId ?? "");
      const withContainers = sandboxContainers?.wanted() ?? false;
      const containers = withContainers ? await sandboxContainers!.statuses(s.id) : [];
      return {
        status: sandboxStatusToCri(s),
        info: request.verbose ? { info: JSON.stringify(s.info) } : {},
        containersStatuses: containers.map(statusToCri),
        timestamp: withContainers ? timestamp : 0n,
      };
    },

    async UpdatePodSandboxResources(request: cri.UpdatePodSandboxResourcesRequest): Promise<cri.UpdatePodSandboxResourcesResponse> {
      if (!request.podSandboxId) throw invalidArgument("pod_sandbox_id is required");
      await recordPodResources(sandboxes, request.podSandboxId, {
        overhead: linuxResourcesRecord(request.overhead),
        resources: linuxResourcesRecord(request.resources),
      });
      return {};
    },

    async ListPodSandbox(request: cri.ListPodSandboxRequest): Promise<cri.ListPodSandboxResponse> {
      return { items: await listPodSandboxes(request.filter) };
    },

    async StreamPodSandboxes(request: cri.StreamPodSandboxesRequest, _ctx, send) {
      await sendInBatches(await listPodSandboxes(request.filter), (podSandboxes) => send({ podSandboxes }));
    },
  };
}
