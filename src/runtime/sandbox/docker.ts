/**
 * The pause container's Docker configuration, dockershim-style: it holds the
 * pod's namespaces, so the pod-level settings Docker refuses on containers
 * joined with `container:` network mode (hostname, DNS, published ports) and
 * the IPC-namespace sysctls live here. IPC is shareable so containers can
 * join it.
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { invalidArgument } from "../../errors.ts";
import type { ContainerCreateBody, HostConfig, PortBinding } from "../../docker/types.ts";
import { CONTAINER_NAME_LABEL, ROOT_LABEL, TYPE_LABEL, TYPE_SANDBOX, toDockerLabels } from "../labels.ts";
import { SANDBOX_CONTAINER_NAME } from "../naming.ts";
import type { SandboxSpec, SeccompSpec } from "./spec.ts";
import { clampOomScore, type OomScorePolicy } from "../container/oom-score.ts";

export { ROOT_LABEL };

export interface SandboxDockerOptions {
  image: string;
  cgroupDriver: "systemd" | "cgroupfs";
  /** Who wires the pod network: cridock's CNI layer or Docker's bridge. */
  networkKind: "cni" | "docker";
  rootDirectory: string;
  logMaxSize: string;
  logMaxFile: number;
  /** Whether (and to what) oom_score_adj is clamped on this host; undefined: as asked. */
  oomScore?: OomScorePolicy;
}

export async function sandboxCreateBody(spec: SandboxSpec, options: SandboxDockerOptions): Promise<ContainerCreateBody> {
  const hostNetwork = spec.namespaces.network === "node";
  const host: HostConfig = {
    NetworkMode: hostNetwork ? "host" : options.networkKind === "cni" ? "none" : "default",
    IpcMode: spec.namespaces.ipc === "node" ? "host" : "shareable",
    PidMode: spec.namespaces.pid === "node" ? "host" : "",
    RestartPolicy: { Name: "no" },
    LogConfig: { Type: "json-file", Config: { "max-size": options.logMaxSize, "max-file": String(options.logMaxFile) } },
    Privileged: spec.security.privileged,
    ReadonlyRootfs: spec.security.readonlyRootfs,
    SecurityOpt: await seccompOptions(spec.security.seccomp, spec.security.privileged),
  };
  // No negative score (cri-dockerd sets -998): lowering it needs CAP_SYS_RESOURCE, which
  // dockerd lacks when it runs in a container itself, and start then fails in runc. Docker's
  // default is 0, raised to the floor on a restricted host whose runtime runs above 0.
  const oomScore = clampOomScore(0, options.oomScore);
  if (oomScore !== 0) host.OomScoreAdj = oomScore;
  if (spec.cgroupParent) {
    // Docker's systemd driver takes a slice name, not a path (cri-dockerd does the same).
    host.CgroupParent = options.cgroupDriver === "systemd" ? basename(spec.cgroupParent) : spec.cgroupParent;
  }
  if (Object.keys(spec.sysctls).length > 0) {
    if (hostNetwork && Object.keys(spec.sysctls).some((k) => k.startsWith("net."))) {
      throw invalidArgument("pod sandbox sets net.* sysctls but uses the host network");
    }
    host.Sysctls = { ...spec.sysctls };
  }
  if (spec.runtimeHandler) host.Runtime = spec.runtimeHandler;
  if (spec.security.supplementalGroups.length > 0) host.GroupAdd = [...spec.security.supplementalGroups];
  if (spec.dns && !hostNetwork) {
    if (spec.dns.servers.length) host.Dns = [...spec.dns.servers];
    if (spec.dns.searches.length) host.DnsSearch = [...spec.dns.searches];
    if (spec.dns.options.length) host.DnsOptions = [...spec.dns.options];
  }

  const body: ContainerCreateBody = {
    Image: options.image,
    Labels: toDockerLabels(spec.labels, spec.annotations, {
      [TYPE_LABEL]: TYPE_SANDBOX,
      [CONTAINER_NAME_LABEL]: SANDBOX_CONTAINER_NAME,
      [ROOT_LABEL]: options.rootDirectory,
    }),
    HostConfig: host,
  };
  if (spec.hostname && !hostNetwork) body.Hostname = spec.hostname;
  if (spec.security.runAsUser !== undefined) {
    body.User = spec.security.runAsGroup !== undefined ? `${spec.security.runAsUser}:${spec.security.runAsGroup}` : spec.security.runAsUser;
  }
  // With Docker's bridge the ports are Docker's to publish; with CNI the portmap plugin does it.
  if (options.networkKind === "docker" && !hostNetwork && spec.portMappings.length > 0) {
    const exposed: Record<string, Record<string, never>> = {};
    const bindings: Record<string, PortBinding[]> = {};
    for (const pm of spec.portMappings) {
      const key = `${pm.containerPort}/${pm.protocol}`;
      exposed[key] = {};
      if (pm.hostPort) (bindings[key] ??= []).push({ HostIp: pm.hostIp, HostPort: String(pm.hostPort) });
    }
    body.ExposedPorts = exposed;
    host.PortBindings = bindings;
  }
  return body;
}

async function seccompOptions(seccomp: SeccompSpec, privileged: boolean): Promise<string[]> {
  if (privileged) return [];
  switch (seccomp.type) {
    case "runtime-default":
      return [];
    case "unconfined":
      return ["seccomp=unconfined"];
    case "localhost": {
      let profile: string;
      try {
        profile = await readFile(seccomp.path, "utf8");
      } catch (err) {
        throw invalidArgument(`pod sandbox seccomp profile ${seccomp.path} cannot be read`, err);
      }
      return [`seccomp=${profile}`];
    }
  }
}
