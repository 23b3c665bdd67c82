/**
 * The subset of Docker Engine API types cridock uses (API 1.41+). Field names
 * are Docker's, so these objects go on the wire as they are.
 */

export interface DockerVersion {
  Version: string;
  ApiVersion: string;
  MinAPIVersion?: string;
  Os: string;
  Arch: string;
  KernelVersion?: string;
  GitCommit?: string;
}

export interface DockerInfo {
  ID: string;
  Name: string;
  ServerVersion: string;
  DockerRootDir: string;
  Driver: string;
  CgroupDriver: "cgroupfs" | "systemd" | "none" | string;
  CgroupVersion?: "1" | "2" | string;
  Runtimes?: Record<string, { path?: string; runtimeArgs?: string[] }>;
  DefaultRuntime?: string;
  KernelVersion?: string;
  OperatingSystem?: string;
  NCPU?: number;
  MemTotal?: number;
  SecurityOptions?: string[];
  Containers?: number;
  Images?: number;
  /** Engine API 1.44+: the CDI spec directories; empty or absent when the engine's CDI support is off. */
  CDISpecDirs?: string[] | null;
  /** dockerd runs with --experimental (or "experimental": true): only then does it serve checkpoints. */
  ExperimentalBuild?: boolean;
}

export type DockerContainerState = "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead";

export interface PortBinding {
  HostIp?: string;
  HostPort?: string;
}

export interface MountPoint {
  Type?: string;
  Name?: string;
  Source: string;
  Destination: string;
  Mode?: string;
  RW?: boolean;
  Propagation?: string;
}

export interface DockerMount {
  Target: string;
  Source: string;
  /** "image" needs Engine API 1.48: Source is an image present in the engine. */
  Type: "bind" | "volume" | "tmpfs" | "npipe" | "image";
  ReadOnly?: boolean;
  Consistency?: string;
  BindOptions?: {
    Propagation?: "private" | "rprivate" | "shared" | "rshared" | "slave" | "rslave";
    NonRecursive?: boolean;
    CreateMountpoint?: boolean;
    ReadOnlyNonRecursive?: boolean;
    ReadOnlyForceRecursive?: boolean;
  };
  TmpfsOptions?: { SizeBytes?: number; Mode?: number };
  /** Type "image": a path inside the image to mount instead of its root. */
  ImageOptions?: { Subpath?: string };
}

/** A device for a container by a device driver; Driver "cdi" takes fully qualified CDI names. */
export interface DeviceRequest {
  Driver: string;
  Count?: number;
  DeviceIDs?: string[];
  Capabilities?: string[][];
  Options?: Record<string, string>;
}

export interface DeviceMapping {
  PathOnHost: string;
  PathInContainer: string;
  CgroupPermissions: string;
}

export interface Ulimit {
  Name: string;
  Soft: number;
  Hard: number;
}

export interface Resources {
  CpuShares?: number;
  Memory?: number;
  NanoCpus?: number;
  CgroupParent?: string;
  BlkioWeight?: number;
  CpuPeriod?: number;
  CpuQuota?: number;
  CpuRealtimePeriod?: number;
  CpuRealtimeRuntime?: number;
  CpusetCpus?: string;
  CpusetMems?: string;
  Devices?: DeviceMapping[];
  DeviceCgroupRules?: string[];
  MemoryReservation?: number;
  MemorySwap?: number;
  MemorySwappiness?: number | null;
  OomKillDisable?: boolean;
  PidsLimit?: number | null;
  Ulimits?: Ulimit[];
}

export interface HostConfig extends Resources {
  Binds?: string[];
  ContainerIDFile?: string;
  LogConfig?: { Type: string; Config?: Record<string, string> };
  NetworkMode?: string;
  PortBindings?: Record<string, PortBinding[]>;
  RestartPolicy?: { Name: "" | "no" | "always" | "unless-stopped" | "on-failure"; MaximumRetryCount?: number };
  AutoRemove?: boolean;
  VolumeDriver?: string;
  VolumesFrom?: string[];
  Mounts?: DockerMount[];
  CapAdd?: string[] | null;
  CapDrop?: string[] | null;
  CgroupnsMode?: "private" | "host";
  Dns?: string[];
  DnsOptions?: string[];
  DnsSearch?: string[];
  ExtraHosts?: string[];
  GroupAdd?: string[];
  IpcMode?: string;
  Cgroup?: string;
  Links?: string[];
  OomScoreAdj?: number;
  PidMode?: string;
  Privileged?: boolean;
  PublishAllPorts?: boolean;
  ReadonlyRootfs?: boolean;
  SecurityOpt?: string[];
  StorageOpt?: Record<string, string>;
  Tmpfs?: Record<string, string>;
  UTSMode?: string;
  UsernsMode?: string;
  ShmSize?: number;
  Sysctls?: Record<string, string>;
  Runtime?: string;
  /** OCI spec annotations (Engine API 1.43 and newer). */
  Annotations?: Record<string, string>;
  MaskedPaths?: string[];
  ReadonlyPaths?: string[];
  Init?: boolean | null;
  DeviceRequests?: DeviceRequest[];
}

export interface ContainerConfig {
  Hostname?: string;
  Domainname?: string;
  User?: string;
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  ExposedPorts?: Record<string, Record<string, never>>;
  Tty?: boolean;
  OpenStdin?: boolean;
  StdinOnce?: boolean;
  Env?: string[] | null;
  Cmd?: string[] | null;
  Healthcheck?: { Test?: string[] };
  ArgsEscaped?: boolean;
  Image?: string;
  Volumes?: Record<string, Record<string, never>> | null;
  WorkingDir?: string;
  Entrypoint?: string[] | null;
  NetworkDisabled?: boolean;
  OnBuild?: string[] | null;
  Labels?: Record<string, string> | null;
  StopSignal?: string;
  StopTimeout?: number;
  Shell?: string[];
}

/** Body of POST /containers/create. */
export interface ContainerCreateBody extends ContainerConfig {
  HostConfig?: HostConfig;
  NetworkingConfig?: { EndpointsConfig?: Record<string, unknown> };
}

export interface ContainerCreateResponse {
  Id: string;
  Warnings: string[] | null;
}

/** An item of GET /containers/json. */
export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  ImageID: string;
  Command: string;
  /** Seconds since the epoch. */
  Created: number;
  State: DockerContainerState | string;
  Status: string;
  Labels: Record<string, string> | null;
  Ports?: { IP?: string; PrivatePort: number; PublicPort?: number; Type: string }[];
  HostConfig?: { NetworkMode?: string };
  Mounts?: MountPoint[];
  SizeRw?: number;
  SizeRootFs?: number;
}

export interface ContainerStateInfo {
  Status: DockerContainerState | string;
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  /** RFC 3339 with nanoseconds; "0001-01-01T00:00:00Z" when unset. */
  StartedAt: string;
  FinishedAt: string;
}

export interface EndpointSettings {
  IPAddress?: string;
  IPPrefixLen?: number;
  GlobalIPv6Address?: string;
  GlobalIPv6PrefixLen?: number;
  Gateway?: string;
  MacAddress?: string;
  NetworkID?: string;
}

/** GET /containers/{id}/json. */
export interface ContainerInspect {
  Id: string;
  Created: string;
  Path: string;
  Args: string[];
  State: ContainerStateInfo;
  Image: string;
  ResolvConfPath: string;
  HostnamePath: string;
  HostsPath: string;
  LogPath: string;
  Name: string;
  RestartCount: number;
  Driver: string;
  Platform?: string;
  MountLabel?: string;
  ProcessLabel?: string;
  AppArmorProfile?: string;
  ExecIDs?: string[] | null;
  HostConfig: HostConfig;
  Mounts: MountPoint[];
  Config: ContainerConfig;
  NetworkSettings: {
    SandboxKey?: string;
    IPAddress?: string;
    IPPrefixLen?: number;
    GlobalIPv6Address?: string;
    Ports?: Record<string, PortBinding[] | null> | null;
    Networks?: Record<string, EndpointSettings>;
  };
  SizeRw?: number;
  SizeRootFs?: number;
  /** overlay2: LowerDir, MergedDir, UpperDir (the writable layer), WorkDir. */
  GraphDriver?: { Name: string; Data?: Record<string, string> | null };
}

/** POST /containers/{id}/checkpoints (experimental daemons only). */
export interface CheckpointCreateBody {
  /** A name Docker accepts as a file name ([a-zA-Z0-9][a-zA-Z0-9_.-]*); the CRIU images go to CheckpointDir/CheckpointID. */
  CheckpointID: string;
  /** Instead of Docker's own per-container directory (under its root). */
  CheckpointDir?: string;
  /** Stop the container after the dump (false: it runs on). */
  Exit: boolean;
}

/** GET /containers/{id}/changes: Kind 0 modified, 1 added, 2 deleted. */
export interface ContainerChange {
  Path: string;
  Kind: 0 | 1 | 2;
}

/** The X-Docker-Container-Path-Stat header of HEAD /containers/{id}/archive (base64 JSON); mode is Go's os.FileMode. */
export interface ContainerPathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

/** An item of GET /images/json. */
export interface ImageSummary {
  Id: string;
  ParentId: string;
  RepoTags: string[] | null;
  RepoDigests: string[] | null;
  Created: number;
  Size: number;
  SharedSize: number;
  VirtualSize?: number;
  Labels: Record<string, string> | null;
  Containers: number;
}

/** GET /images/{name}/json. */
export interface ImageInspect {
  Id: string;
  RepoTags: string[] | null;
  RepoDigests: string[] | null;
  Parent?: string;
  Comment?: string;
  Created: string;
  Author?: string;
  Config: ContainerConfig | null;
  Architecture: string;
  Variant?: string;
  Os: string;
  Size: number;
  VirtualSize?: number;
  RootFS?: { Type: string; Layers?: string[] };
  Metadata?: { LastTagTime?: string };
}

export interface ImageDeleteItem {
  Untagged?: string;
  Deleted?: string;
}

/** One JSON line of a pull/push progress stream. */
export interface ProgressMessage {
  id?: string;
  status?: string;
  progress?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { code?: number; message?: string };
  aux?: unknown;
}

export interface ExecCreateBody {
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  DetachKeys?: string;
  Tty?: boolean;
  ConsoleSize?: [number, number] | null;
  Env?: string[];
  Cmd: string[];
  Privileged?: boolean;
  User?: string;
  WorkingDir?: string;
}

export interface ExecInspect {
  ID: string;
  Running: boolean;
  ExitCode: number | null;
  ProcessConfig: { tty: boolean; entrypoint: string; arguments: string[]; privileged: boolean; user?: string };
  OpenStdin: boolean;
  OpenStderr: boolean;
  OpenStdout: boolean;
  ContainerID: string;
  Pid: number;
}

/** POST /containers/{id}/wait. */
export interface WaitResponse {
  StatusCode: number;
  Error?: { Message: string } | null;
}

/** Filters as Docker takes them in the `filters` query parameter. */
export type DockerFilters = Record<string, string[]>;
