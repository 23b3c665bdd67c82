/**
 * Taking a node over from cri-dockerd without recreating its pods. At
 * start-up, each pause container that cri-dockerd made (cri-dockerd's names
 * and labels, no cridock root label, a checkpoint under
 * --cri-dockerd-root-directory) and that cridock has no checkpoint for gets
 * one, so from then on it is a cridock sandbox like any other:
 *  - metadata, labels and annotations from Docker; host network and port
 *    mappings from cri-dockerd's checkpoint;
 *  - for a running pod on CNI: its network namespace pinned at
 *    <root>/netns/<id> (so CNI DEL has it even after the pause process
 *    ends), its IPs read from that namespace once, and a CNI cache entry
 *    that DEL will use (libcni's own, else one with the current config and
 *    the CNI_ARGS cri-dockerd sends);
 *  - the CRI log of each of its containers taken over (logs-takeover.ts).
 * cri-dockerd's files are only read. The checkpoint is written last, so a
 * crash half-way leaves the pod to be adopted again at the next start; a
 * pod that cannot be adopted is logged and left alone (listed from Docker).
 */
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { describeCause } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { LogFollowers } from "../../logs/followers.ts";
import { pinNetns, unpinNetns } from "../../network/netns.ts";
import type { PodNetwork, PortMappingSpec, PortProtocol } from "../../network/plugin.ts";
import { readPodAddresses } from "../../network/pod-ips.ts";
import { readCriDockerdCheckpoint, type CriDockerdCheckpoint } from "../../store/cri-dockerd-checkpoint.ts";
import { fromDockerLabels, LOG_PATH_LABEL, SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL, TYPE_SANDBOX } from "../labels.ts";
import { parseName } from "../naming.ts";
import { ROOT_LABEL } from "./docker.ts";
import { takeOverContainerLogs } from "./logs-takeover.ts";
import { dockerBridgeIps } from "./queries.ts";
import type { SandboxManager } from "./manager.ts";
import { dockerTimeToNanos, namespacesOf, type SandboxRecord } from "./record.ts";
import type { SandboxSpec } from "./spec.ts";

export interface AdoptionDeps {
  docker: DockerClient;
  sandboxes: SandboxManager;
  network: PodNetwork;
  logs: LogFollowers;
  criDockerdRoot: string;
  log: Logger;
}

export interface AdoptionReport {
  adopted: string[];
  failed: string[];
}

/** cri-dockerd's CNI_ARGS (as libcni received them from it). */
function criDockerdCniArgs(name: string, namespace: string, id: string): [string, string][] {
  return [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", namespace],
    ["K8S_POD_NAME", name],
    ["K8S_POD_INFRA_CONTAINER_ID", id],
  ];
}

export async function adoptCriDockerdSandboxes(deps: AdoptionDeps): Promise<AdoptionReport> {
  const report: AdoptionReport = { adopted: [], failed: [] };
  if (!deps.criDockerdRoot) return report;
  const log = deps.log.child({ component: "adoption" });
  let candidates;
  try {
    candidates = await deps.docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_SANDBOX}`] });
  } catch (err) {
    log.error({ err: describeCause(err) }, "cannot list pause containers; nothing taken over from cri-dockerd");
    return report;
  }
  for (const c of candidates) {
    if (c.Labels?.[ROOT_LABEL] !== undefined || deps.sandboxes.records.has(c.Id)) continue;
    let checkpoint: CriDockerdCheckpoint | undefined;
    try {
      checkpoint = await readCriDockerdCheckpoint(deps.criDockerdRoot, c.Id);
    } catch (err) {
      log.warn({ sandboxId: c.Id, err: describeCause(err) }, "cri-dockerd's checkpoint of this pod is unusable; leaving the pod alone");
      report.failed.push(c.Id);
      continue;
    }
    if (!checkpoint) continue; // not cri-dockerd's (or not on this root): not ours to take
    try {
      await deps.sandboxes.withLock(c.Id, () => adoptOne(deps, c.Id, checkpoint!, log));
      report.adopted.push(c.Id);
    } catch (err) {
      log.error({ sandboxId: c.Id, err: describeCause(err) }, "could not take this pod over from cri-dockerd; it stays as cri-dockerd left it");
      report.failed.push(c.Id);
    }
  }
  if (report.adopted.length + report.failed.length > 0) log.info(report, "pods taken over from cri-dockerd");
  return report;
}

function portMappings(checkpoint: CriDockerdCheckpoint): PortMappingSpec[] {
  return (checkpoint.portMappings ?? [])
    .filter((p) => p.containerPort !== undefined)
    .map((p) => ({ protocol: (p.protocol ?? "tcp") as PortProtocol, containerPort: p.containerPort!, hostPort: p.hostPort ?? 0, hostIp: p.hostIp }));
}

/** The CRI log directory: kubelet's layout is <dir>/<container>/<attempt>.log. */
function logDirectoryOf(members: ContainerInspect[], fallback: string): string {
  for (const m of members) {
    const path = m.Config.Labels?.[LOG_PATH_LABEL];
    if (path && path.startsWith("/")) return join(path, "..", "..");
  }
  return fallback;
}

async function adoptOne(deps: AdoptionDeps, id: string, checkpoint: CriDockerdCheckpoint, log: Logger): Promise<void> {
  const { docker, sandboxes, network } = deps;
  const inspect = await docker.inspectContainer(id);
  const parsed = parseName(inspect.Name.replace(/^\//, ""));
  if (!parsed) throw new Error(`pause container name ${inspect.Name} is not cri-dockerd's k8s_POD_<pod>_<namespace>_<uid>_<attempt>`);
  if (parsed.pod.name !== checkpoint.name || parsed.pod.namespace !== checkpoint.namespace) {
    throw new Error(`checkpoint names pod ${checkpoint.namespace}/${checkpoint.name}, the container ${parsed.pod.namespace}/${parsed.pod.name}`);
  }
  if (!checkpoint.checksumValid) log.warn({ sandboxId: id }, "cri-dockerd's checkpoint fails its checksum; using it anyway (names match Docker's)");
  const members = await Promise.all(
    (await docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_CONTAINER}`, `${SANDBOX_ID_LABEL}=${id}`] })).map((m) => docker.inspectContainer(m.Id)),
  );
  const split = fromDockerLabels(inspect.Config.Labels, true);
  const namespaces = namespacesOf(undefined, inspect);
  const hostNetwork = checkpoint.hostNetwork || namespaces.network === "node";
  const pod = { name: parsed.pod.name, namespace: parsed.pod.namespace, uid: parsed.pod.uid };
  const spec: SandboxSpec = {
    metadata: { ...pod, attempt: parsed.attempt },
    hostname: inspect.Config.Hostname ?? "",
    logDirectory: logDirectoryOf(members, `/var/log/pods/${pod.namespace}_${pod.name}_${pod.uid}`),
    portMappings: portMappings(checkpoint),
    labels: split.labels,
    annotations: split.annotations,
    cgroupParent: inspect.HostConfig.CgroupParent ?? "",
    sysctls: { ...(inspect.HostConfig.Sysctls ?? {}) },
    namespaces,
    security: {
      privileged: inspect.HostConfig.Privileged ?? false,
      readonlyRootfs: inspect.HostConfig.ReadonlyRootfs ?? false,
      supplementalGroups: [],
      seccomp: { type: "unconfined" },
    },
    runtimeHandler: inspect.HostConfig.Runtime && inspect.HostConfig.Runtime !== "runc" ? inspect.HostConfig.Runtime : "",
  };
  const running = inspect.State.Running && inspect.State.Pid > 0;
  const record: SandboxRecord = {
    id,
    spec,
    createdAt: dockerTimeToNanos(inspect.Created).toString(),
    phase: running ? "ready" : "stopped",
    hostNetwork,
    networkKind: network.kind,
    netnsPath: "",
    network: { phase: "none", name: "", ips: [], result: null },
    adoptedFrom: "cri-dockerd",
  };
  if (!hostNetwork && network.kind === "cni" && network.adopt) {
    const request = { sandboxId: id, pod, netnsPath: "", portMappings: spec.portMappings };
    if (running) {
      record.netnsPath = sandboxes.netnsPathOf(id);
      await pinNetns(inspect.State.Pid, record.netnsPath);
      try {
        const addresses = await readPodAddresses(record.netnsPath);
        if (addresses.length === 0) throw new Error("the pod's eth0 has no global address");
        const ips = addresses.map((a) => a.slice(0, a.lastIndexOf("/")));
        const cached = await network.adopt({ ...request, netnsPath: record.netnsPath }, criDockerdCniArgs(pod.name, pod.namespace, id), { addresses });
        record.network = { phase: "attached", name: cached!.networkName, ips, result: cached!.result };
      } catch (err) {
        await unpinNetns(record.netnsPath).catch(() => undefined);
        throw err;
      }
    } else {
      // Stopped under cri-dockerd: if its ADD entry is still cached, DEL never ran; StopPodSandbox/RemovePodSandbox run it.
      const cached = await network.adopt(request, criDockerdCniArgs(pod.name, pod.namespace, id), undefined);
      if (cached) record.network = { phase: "attached", name: cached.networkName, ips: [], result: cached.result };
    }
  }
  if (!hostNetwork && network.kind === "docker") {
    record.network = { phase: "attached", name: "docker-bridge", ips: dockerBridgeIps(inspect), result: inspect.NetworkSettings };
  }
  await takeOverContainerLogs(deps.logs, members, log);
  await sandboxes.saveRecord(record);
  log.info({ sandboxId: id, pod: `${pod.namespace}/${pod.name}`, ips: record.network.ips, phase: record.phase }, "took a pod over from cri-dockerd");
}
