/**
 * What the container, streaming and stats code needs to know about a pod
 * sandbox, as runtime/sandbox/manager.ts reports it. A plain object: no CRI or
 * Docker shapes leak through it.
 */

import type { UsernsMappings } from "../../oci/id-mappings.ts";

export type NamespaceMode = "pod" | "container" | "node" | "target";

export interface SandboxView {
  /** Docker id of the pause container (= the CRI sandbox id). */
  id: string;
  metadata: { name: string; namespace: string; uid: string; attempt: number };
  ready: boolean;
  /** Host pid of the pause process; 0 when it is not running. */
  pid: number;
  /** PodSandboxConfig.log_directory ("" when none). */
  logDirectory: string;
  /** Cgroup parent as given to Docker (already adjusted for the cgroup driver). */
  cgroupParent: string;
  hostNetwork: boolean;
  hostPid: boolean;
  hostIpc: boolean;
  runtimeHandler: string;
  /** Persistent handle of the pod's network namespace ("" for host network). */
  netnsPath: string;
  /** Pod IPs (first is primary); empty for host network. */
  ips: string[];
  /** Sysctls, seccomp and similar sandbox-level settings containers inherit. */
  sysctls: Record<string, string>;
  privileged: boolean;
  /** The pod's own user namespace mappings; absent: the host's. */
  userns?: UsernsMappings;
}

export interface SandboxLookup {
  /** The sandbox with this id (or unique id prefix); NOT_FOUND when there is none. */
  view(id: string): Promise<SandboxView>;
}
