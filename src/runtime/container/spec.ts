/**
 * Plain descriptions of a container as the domain sees it: what CreateContainer
 * asks for (ContainerSpec) and what ContainerStatus/ListContainers report
 * (ContainerInfo, ContainerSummaryInfo). cri/container-rpcs.ts maps protobuf
 * messages onto these; nothing here knows protobuf or Docker shapes.
 */
import type { UsernsMappings } from "../../oci/id-mappings.ts";

export type Propagation = "private" | "host-to-container" | "bidirectional";

export interface MountSpec {
  containerPath: string;
  hostPath: string;
  readonly: boolean;
  selinuxRelabel: boolean;
  propagation: Propagation;
  recursiveReadOnly: boolean;
  /**
   * An image volume (Mount.image): the image as the user named it; "" for a
   * host path. Needs Engine API 1.48 (mounts.ts).
   */
  image: string;
  /** Image volumes only: a relative path inside the image to mount instead of its root. */
  imageSubPath: string;
  /** The mount\'s uid/gid mappings (CRI Mount.uid_mappings): kubelet gives its pod\'s for a pod in its own user namespace, to idmap the mount. */
  idMappings?: UsernsMappings;
  /**
   * Bind mount options kubelet asks beside the mount's own (CRI
   * Mount.mount_options, KEP-5855: noexec, nodev, nosuid), carried into the
   * OCI spec by cridock's runtime layer; absent when none are asked.
   */
  mountOptions?: string[];
}

/** A mount as ContainerStatus reports it. */
export interface MountStatus extends MountSpec {
  /** Image volumes: the id of the image mounted (Docker's sha256 id, as PullImage returns it); "" otherwise or when unknown. */
  imageRef: string;
}

export interface DeviceSpec {
  containerPath: string;
  hostPath: string;
  permissions: string;
}

export type ProfileKind = "runtime-default" | "unconfined" | "localhost";

export interface SecurityProfile {
  kind: ProfileKind;
  /** Localhost: the seccomp file path or the AppArmor profile name. */
  localhostRef: string;
}

export type NamespaceMode = "pod" | "container" | "node" | "target";

export interface SecuritySpec {
  privileged: boolean;
  capAdd: string[];
  capDrop: string[];
  capAddAmbient: string[];
  pidMode: NamespaceMode;
  targetId: string;
  /** The pod's user namespace mappings (mode POD); absent: the host's user namespace. */
  userns?: UsernsMappings;
  runAsUser?: bigint;
  runAsGroup?: bigint;
  runAsUsername: string;
  readonlyRootfs: boolean;
  supplementalGroups: bigint[];
  supplementalGroupsStrict: boolean;
  noNewPrivs: boolean;
  maskedPaths: string[];
  readonlyPaths: string[];
  /** Undefined when the request names none (cridock then runs unconfined, as cri-dockerd does). */
  seccomp?: SecurityProfile;
  apparmor?: SecurityProfile;
  selinux?: { user: string; role: string; type: string; level: string };
}

/** Linux resources; undefined fields were not given (0 in CRI means "not set"). */
export interface ResourceSpec {
  cpuPeriod: bigint;
  cpuQuota: bigint;
  cpuShares: bigint;
  memoryLimitInBytes: bigint;
  memorySwapLimitInBytes: bigint;
  oomScoreAdj: bigint;
  cpusetCpus: string;
  cpusetMems: string;
  hugepageLimits: { pageSize: string; limit: bigint }[];
  unified: Record<string, string>;
}

export interface ContainerSpec {
  name: string;
  attempt: number;
  /** The image as the user gave it (reference or id). */
  image: string;
  /**
   * The image as the pod names it (CRI's userSpecifiedImage; kubelet sends
   * the resolved image id as `image`). ContainerStatus reports it, because
   * kubelet shows that field as the pod's status.containerStatuses[].image,
   * which specs and users compare with the pod's own image. Absent or "" when
   * the client sent none.
   */
  userImage?: string;
  command: string[];
  args: string[];
  workingDir: string;
  envs: { key: string; value: string }[];
  mounts: MountSpec[];
  devices: DeviceSpec[];
  cdiDevices: string[];
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Relative to the sandbox's log directory; "" for no log file. */
  logPath: string;
  stdin: boolean;
  stdinOnce: boolean;
  tty: boolean;
  /** Signal name such as "SIGTERM"; "" for the image's own. */
  stopSignal: string;
  resources?: ResourceSpec;
  security?: SecuritySpec;
}

export type ContainerStateName = "created" | "running" | "exited" | "unknown";

/** One entry of ListContainers. */
export interface ContainerSummaryInfo {
  id: string;
  sandboxId: string;
  name: string;
  attempt: number;
  image: string;
  imageId: string;
  state: ContainerStateName;
  createdAt: bigint;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** ContainerStatus. */
export interface ContainerInfo extends ContainerSummaryInfo {
  startedAt: bigint;
  finishedAt: bigint;
  exitCode: number;
  reason: string;
  message: string;
  mounts: MountStatus[];
  /** Full path of the CRI log file ("" when none). */
  logPath: string;
  resources: ResourceSpec;
  user?: { uid: bigint; gid: bigint; supplementalGroups: bigint[] };
  stopSignal: string;
  /** Verbose extras (`crictl inspect` info). */
  info: Record<string, unknown>;
}

export interface ContainerFilterSpec {
  id: string;
  state?: ContainerStateName;
  sandboxId: string;
  labelSelector: Record<string, string>;
}
