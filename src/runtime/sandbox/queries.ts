/**
 * The read side of sandboxes: PodSandboxStatus, ListPodSandbox and the
 * SandboxView other areas use, assembled from the checkpoint (what cridock
 * set up) and Docker (whether the pause process runs). Sandboxes without a
 * checkpoint (made by cri-dockerd) are described from Docker alone.
 */
import { usernsFromLabels } from "../pod-userns.ts";
import type { DockerClient } from "../../docker/client.ts";
import { isNotFound } from "../../docker/errors.ts";
import { invalidArgument } from "../../errors.ts";
import type { ContainerInspect, ContainerSummary } from "../../docker/types.ts";
import { TYPE_LABEL, TYPE_SANDBOX, matchesSelector } from "../labels.ts";
import { validateId } from "../lookup.ts";
import { parseName } from "../naming.ts";
import { ROOT_LABEL } from "./docker.ts";
import {
  describe,
  dockerTimeToNanos,
  isReady,
  namespacesOf,
  type SandboxListFilter,
  type SandboxRecord,
  type SandboxStatusInfo,
  type SandboxSummary,
} from "./record.ts";
import type { SandboxView } from "./view.ts";

export interface ResolvedSandbox {
  id: string;
  container?: ContainerSummary;
  record?: SandboxRecord;
  /**
   * The pause container was not listed (a full id with a checkpoint is
   * known without a list): its inspect says whether it is still there.
   */
  unlisted?: boolean;
}

async function inspectIfPresent(docker: DockerClient, { id, container, unlisted }: ResolvedSandbox): Promise<ContainerInspect | undefined> {
  if (!container && !unlisted) return undefined;
  try {
    // PodSandboxStatus comes with every pod sync of kubelet: from memory while Docker's events show no change.
    return await docker.inspectContainerCached(id);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    return undefined;
  }
}

export async function sandboxStatus(docker: DockerClient, resolved: ResolvedSandbox): Promise<SandboxStatusInfo> {
  const { id, container, record } = resolved;
  const inspect = await inspectIfPresent(docker, resolved);
  const running = inspect?.State.Running ?? false;
  const ips = record ? (record.hostNetwork ? [] : record.network.ips) : inspect ? dockerBridgeIps(inspect) : [];
  return {
    id,
    ...describe(record, container),
    ready: isReady(record, running),
    createdAt: record && record.createdAt !== "0" ? BigInt(record.createdAt) : dockerTimeToNanos(inspect?.Created),
    ips,
    namespaces: namespacesOf(record, inspect),
    info: {
      pid: inspect?.State.Pid ?? 0,
      containerState: inspect?.State.Status ?? "gone",
      netnsPath: record?.netnsPath ?? "",
      runtimeHandler: record?.spec.runtimeHandler ?? inspect?.HostConfig.Runtime ?? "",
      network: record ? { kind: record.networkKind, phase: record.network.phase, name: record.network.name, result: record.network.result } : null,
      config: record?.spec ?? null,
      podResources: record?.podResources ?? null,
      adoptedFrom: record?.adoptedFrom ?? null,
      image: inspect?.Config.Image ?? container?.Image ?? "",
    },
  };
}

/**
 * Whether a container Docker lists with the sandbox type label is a pod
 * sandbox of this runtime. ListPodSandbox is what `kubeadm reset` stops and
 * removes one by one, and what kubelet kills as orphans when no pod of its
 * own matches, so the label alone (which anyone can set) is not enough. A
 * sandbox with a checkpoint here is ours; any other must bear a sandbox name
 * (k8s_POD_<pod>_<namespace>_<uid>_<attempt>, as cridock and cri-dockerd
 * name them) and no other cridock's root label: cri-dockerd's pods stay
 * listed (a node switching runtimes keeps them), another cridock's on the
 * same engine do not.
 */
export function isOwnSandbox(c: Pick<ContainerSummary, "Names" | "Labels">, rootDirectory: string, hasRecord: boolean): boolean {
  if (hasRecord) return true;
  if (!parseName(c.Names[0] ?? "")?.isSandbox) return false;
  const root = c.Labels?.[ROOT_LABEL];
  return root === undefined || root === rootDirectory;
}

export async function listSandboxes(
  docker: DockerClient,
  records: Map<string, SandboxRecord>,
  filter: SandboxListFilter,
  rootDirectory: string,
): Promise<SandboxSummary[]> {
  const query: Record<string, string[]> = { label: [`${TYPE_LABEL}=${TYPE_SANDBOX}`] };
  if (filter.id) query.id = [validateId(filter.id, "pod sandbox")];
  const containers = await docker.listContainers(query);
  const out: SandboxSummary[] = [];
  const seen = new Set<string>();
  for (const c of containers) {
    if (filter.id && !c.Id.startsWith(filter.id)) continue;
    const record = records.get(c.Id);
    if (!isOwnSandbox(c, rootDirectory, record !== undefined)) continue;
    seen.add(c.Id);
    out.push({
      id: c.Id,
      ...describe(record, c),
      ready: isReady(record, c.State === "running"),
      createdAt: record && record.createdAt !== "0" ? BigInt(record.createdAt) : BigInt(c.Created) * 1_000_000_000n,
    });
  }
  // A checkpoint whose container is gone is still a sandbox kubelet must stop and remove.
  for (const record of records.values()) {
    if (seen.has(record.id) || (filter.id && !record.id.startsWith(filter.id))) continue;
    out.push({ id: record.id, ...describe(record, undefined), ready: false, createdAt: BigInt(record.createdAt) });
  }
  return out.filter((s) => (filter.ready === undefined || s.ready === filter.ready) && matchesSelector(s.labels, filter.labelSelector));
}

export async function sandboxView(docker: DockerClient, resolved: ResolvedSandbox): Promise<SandboxView> {
  const { id, container, record } = resolved;
  const inspect = await inspectIfPresent(docker, resolved);
  const meta = describe(record, container);
  const ns = namespacesOf(record, inspect);
  const running = inspect?.State.Running ?? false;
  return {
    id,
    metadata: meta.metadata,
    ready: isReady(record, running),
    pid: running ? inspect!.State.Pid : 0,
    logDirectory: record?.spec.logDirectory ?? "",
    cgroupParent: inspect?.HostConfig.CgroupParent ?? "",
    hostNetwork: ns.network === "node",
    hostPid: ns.pid === "node",
    hostIpc: ns.ipc === "node",
    runtimeHandler: meta.runtimeHandler || inspect?.HostConfig.Runtime || "",
    netnsPath: record?.netnsPath ?? "",
    ips: record ? (record.hostNetwork ? [] : [...record.network.ips]) : inspect ? dockerBridgeIps(inspect) : [],
    sysctls: { ...(record?.spec.sysctls ?? inspect?.HostConfig.Sysctls ?? {}) },
    privileged: record?.spec.security.privileged ?? inspect?.HostConfig.Privileged ?? false,
    userns: record?.spec.userns ?? usernsFromLabels(inspect?.Config.Labels),
  };
}


/** IPs Docker's own bridge gave the container, IPv4 first. */
export function dockerBridgeIps(inspect: ContainerInspect): string[] {
  const v4: string[] = [];
  const v6: string[] = [];
  const settings = inspect.NetworkSettings ?? {};
  for (const endpoint of Object.values(settings.Networks ?? {})) {
    if (endpoint.IPAddress) v4.push(endpoint.IPAddress);
    if (endpoint.GlobalIPv6Address) v6.push(endpoint.GlobalIPv6Address);
  }
  if (v4.length === 0 && settings.IPAddress) v4.push(settings.IPAddress);
  return [...new Set([...v4, ...v6])];
}

/**
 * The sandbox whose id is or starts with `prefix`, from Docker and the
 * checkpoints; ambiguous prefixes are refused. A full id with a checkpoint
 * (what kubelet and crictl pass) needs no list: its status and view inspect
 * the pause container anyway, and that inspect tells whether it still
 * exists. On a busy node Docker's events keep the list cache cold, so the
 * list was a round trip of its own in every CreateContainer and
 * PodSandboxStatus.
 */
export async function resolveSandboxPrefix(docker: DockerClient, records: ReadonlyMap<string, SandboxRecord>, prefix: string): Promise<ResolvedSandbox | undefined> {
  const record = prefix.length === 64 ? records.get(prefix) : undefined;
  if (record) return { id: record.id, record, unlisted: true };
  const containers = (await docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_SANDBOX}`], id: [prefix] })).filter((c) =>
    c.Id.startsWith(prefix),
  );
  const ids = new Set(containers.map((c) => c.Id));
  for (const id of records.keys()) if (id.startsWith(prefix)) ids.add(id);
  if (ids.size === 0) return undefined;
  let id: string;
  if (ids.has(prefix)) id = prefix;
  else if (ids.size === 1) id = [...ids][0]!;
  else throw invalidArgument(`pod sandbox id prefix "${prefix}" is ambiguous: it matches ${ids.size} sandboxes`);
  return { id, container: containers.find((c) => c.Id === id), record: records.get(id) };
}
