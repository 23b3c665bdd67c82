/**
 * A pod sandbox request as the runtime sees it: plain data translated from
 * the CRI PodSandboxConfig by cri/sandbox-rpcs.ts, validated here (every
 * field is hostile until checked), and stored in the sandbox checkpoint.
 */
import { isIP } from "node:net";
import { invalidArgument } from "../../errors.ts";
import { checkRequestLabels } from "../labels.ts";
import type { BandwidthSpec, DnsSpec, PortMappingSpec } from "../../network/plugin.ts";
import { invalidNamePart } from "../naming.ts";
import type { NamespaceMode } from "./view.ts";
import { mappingsProblem, type UsernsMappings } from "../../oci/id-mappings.ts";

export type SeccompSpec =
  | { type: "unconfined" }
  | { type: "runtime-default" }
  | { type: "localhost"; path: string };

export interface SandboxSecuritySpec {
  privileged: boolean;
  readonlyRootfs: boolean;
  /** Decimal strings: int64 on the wire. */
  runAsUser?: string;
  runAsGroup?: string;
  supplementalGroups: string[];
  /** supplemental_groups_policy Strict: the pause process gets no groups from the pause image's /etc/group. */
  supplementalGroupsStrict?: boolean;
  seccomp: SeccompSpec;
}

export interface SandboxSpec {
  metadata: { name: string; namespace: string; uid: string; attempt: number };
  hostname: string;
  logDirectory: string;
  dns?: DnsSpec;
  portMappings: PortMappingSpec[];
  labels: Record<string, string>;
  annotations: Record<string, string>;
  cgroupParent: string;
  sysctls: Record<string, string>;
  namespaces: { network: NamespaceMode; pid: NamespaceMode; ipc: NamespaceMode; targetId: string };
  /** The pod's own user namespace (KEP-127, `hostUsers: false`); absent: the host's. */
  userns?: UsernsMappings;
  security: SandboxSecuritySpec;
  runtimeHandler: string;
}

// A trailing dot is allowed: kubelet's FQDN for setHostnameAsFQDN ends in one
// when the cluster domain is empty ("pod.sub.ns.svc."), and the kernel takes it.
const HOSTNAME = /^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,251}[a-zA-Z0-9])?\.?$/;
const SYSCTL = /^[a-zA-Z0-9_.\/-]{1,256}$/;
const DNS_WORD = /^[^\s]{1,255}$/;

/** Throws INVALID_ARGUMENT naming the first bad field. */
export function validateSandboxSpec(spec: SandboxSpec): void {
  const { metadata } = spec;
  checkRequestLabels("pod sandbox", spec.labels, spec.annotations);
  for (const field of ["name", "namespace", "uid"] as const) {
    const reason = invalidNamePart(metadata[field]);
    if (reason) throw invalidArgument(`pod sandbox metadata.${field} "${clip(metadata[field])}" ${reason}`);
  }
  if (!Number.isSafeInteger(metadata.attempt) || metadata.attempt < 0) {
    throw invalidArgument(`pod sandbox metadata.attempt ${metadata.attempt} must be a non-negative integer`);
  }
  if (spec.hostname && !HOSTNAME.test(spec.hostname)) {
    throw invalidArgument(`pod sandbox hostname "${clip(spec.hostname)}" is not a valid host name`);
  }
  if (spec.logDirectory && !spec.logDirectory.startsWith("/")) {
    throw invalidArgument(`pod sandbox log_directory "${clip(spec.logDirectory)}" must be an absolute path`);
  }
  for (const server of spec.dns?.servers ?? []) {
    if (!isIP(server)) throw invalidArgument(`pod sandbox dns_config server "${clip(server)}" is not an IP address`);
  }
  for (const word of [...(spec.dns?.searches ?? []), ...(spec.dns?.options ?? [])]) {
    if (!DNS_WORD.test(word)) throw invalidArgument(`pod sandbox dns_config entry "${clip(word)}" is not a single word`);
  }
  if (spec.userns) {
    const problem = mappingsProblem(spec.userns);
    if (problem) throw invalidArgument(`pod sandbox user namespace: ${problem}`);
    for (const kind of ["network", "pid", "ipc"] as const) {
      // The host's namespaces belong to the host's user namespace: the pod's root could not join them.
      if (spec.namespaces[kind] === "node") throw invalidArgument(`pod sandbox has its own user namespace and the host's ${kind} namespace; a pod can have one or the other`);
    }
  }
  const published = new Set<string>();
  for (const pm of spec.portMappings) {
    if (!validPort(pm.containerPort)) {
      throw invalidArgument(`pod sandbox port mapping container_port ${pm.containerPort} is not in 1..65535`);
    }
    if (pm.hostPort !== 0 && !validPort(pm.hostPort)) {
      throw invalidArgument(`pod sandbox port mapping host_port ${pm.hostPort} is not in 0..65535`);
    }
    if (pm.hostIp && !isIP(pm.hostIp)) {
      throw invalidArgument(`pod sandbox port mapping host_ip "${clip(pm.hostIp)}" is not an IP address`);
    }
    const key = `${pm.protocol}/${pm.hostIp}/${pm.hostPort}`;
    if (pm.hostPort !== 0 && published.has(key)) {
      throw invalidArgument(`pod sandbox publishes host port ${pm.protocol}/${pm.hostPort} twice`);
    }
    published.add(key);
  }
  for (const [key, value] of Object.entries(spec.sysctls)) {
    if (!SYSCTL.test(key) || /[\n\0]/.test(value)) throw invalidArgument(`pod sandbox sysctl "${clip(key)}" is not a sysctl name`);
  }
  if (spec.cgroupParent && (/[\n\0]/.test(spec.cgroupParent) || spec.cgroupParent.includes(".."))) {
    throw invalidArgument(`pod sandbox cgroup_parent "${clip(spec.cgroupParent)}" is not a cgroup path`);
  }
  if (spec.security.seccomp.type === "localhost" && !spec.security.seccomp.path.startsWith("/")) {
    throw invalidArgument(`pod sandbox seccomp localhost profile "${clip(spec.security.seccomp.path)}" must be an absolute path`);
  }
  if (spec.namespaces.network === "target" || spec.namespaces.ipc === "target") {
    throw invalidArgument("pod sandbox network and ipc namespaces cannot target another container");
  }
  if (spec.runtimeHandler && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(spec.runtimeHandler)) {
    throw invalidArgument(`runtime handler "${clip(spec.runtimeHandler)}" is not a Docker runtime name`);
  }
}

function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Pod bandwidth annotations (kubernetes.io/ingress-bandwidth, egress-bandwidth) as CNI wants them. */
export function bandwidthFromAnnotations(annotations: Record<string, string>): BandwidthSpec | undefined {
  const ingress = annotations["kubernetes.io/ingress-bandwidth"];
  const egress = annotations["kubernetes.io/egress-bandwidth"];
  if (!ingress && !egress) return undefined;
  // Burst as kubelet's dockershim chose it: effectively unlimited (MaxInt32 bits).
  const burst = 2 ** 31 - 1;
  const out: BandwidthSpec = {};
  if (ingress) {
    out.ingressRate = parseQuantity(ingress, "kubernetes.io/ingress-bandwidth");
    out.ingressBurst = burst;
  }
  if (egress) {
    out.egressRate = parseQuantity(egress, "kubernetes.io/egress-bandwidth");
    out.egressBurst = burst;
  }
  return out;
}

const SUFFIXES: Record<string, number> = {
  "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** A Kubernetes quantity ("10M", "1Gi", "500k") as a number. */
export function parseQuantity(text: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)([kMGTPE]i?|)$/.exec(text.trim());
  const mult = m ? SUFFIXES[m[2]!] : undefined;
  if (!m || mult === undefined) throw invalidArgument(`annotation ${what} "${clip(text)}" is not a quantity like 10M`);
  return Math.round(Number(m[1]) * mult);
}
