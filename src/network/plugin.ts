/**
 * What the rest of cridock needs from the pod network layer. The CNI
 * implementation lives in network/cni.ts; `NoopNetwork` serves
 * --network-plugin=no-op (Docker's own bridge networking).
 */
import type { StepTimer } from "../steps.ts";

export interface NetworkReadiness {
  ready: boolean;
  /** CamelCase reason, shown by `crictl info` when not ready. */
  reason?: string;
  message?: string;
}

export interface NetworkReadinessSource {
  readiness(): NetworkReadiness;
  /** Pod CIDR from UpdateRuntimeConfig, used for CNI ipRanges. */
  setPodCidr(cidr: string): void;
}

export class NoopNetwork implements NetworkReadinessSource {
  podCidr = "";
  readiness(): NetworkReadiness {
    return { ready: true };
  }
  setPodCidr(cidr: string): void {
    this.podCidr = cidr;
  }
}

export type PortProtocol = "tcp" | "udp" | "sctp";

export interface PortMappingSpec {
  protocol: PortProtocol;
  containerPort: number;
  /** 0: the port is only exposed, not published on the host. */
  hostPort: number;
  /** "" for every host address. */
  hostIp: string;
}

/** Rates in bits per second, bursts in bits (the CNI bandwidth capability). */
export interface BandwidthSpec {
  ingressRate?: number;
  ingressBurst?: number;
  egressRate?: number;
  egressBurst?: number;
}

export interface DnsSpec {
  servers: string[];
  searches: string[];
  options: string[];
}

/** What a network plugin needs to attach or detach one pod. */
export interface PodNetworkRequest {
  sandboxId: string;
  pod: { name: string; namespace: string; uid: string };
  /** Persistent handle of the pod's network namespace (or /proc/<pid>/ns/net while the handle is being made). */
  netnsPath: string;
  /** A process inside the namespace (the pause process), for cheap reads of its state; absent on teardown. */
  pid?: number;
  portMappings: PortMappingSpec[];
  bandwidth?: BandwidthSpec;
  dns?: DnsSpec;
  /** Collects the plugin execs as steps of the calling operation. */
  timer?: StepTimer;
}

export interface TearDownOptions {
  /** Release what can be released, forget the rest (RemovePodSandbox): never throws for a failing plugin. */
  force?: boolean;
}

/** The outcome of attaching a pod, kept in the sandbox checkpoint. */
export interface PodNetworkAttachment {
  networkName: string;
  /** Pod IPs without prefix length, IPv4 first (the first is the primary). */
  ips: string[];
  /** The plugin's result as it returned it (CNI result JSON), for verbose status. */
  result: unknown;
}

/**
 * A pod network implementation. `kind` tells the sandbox code who wires the
 * pause container: "cni" means cridock creates it with network mode none and
 * calls setUp/tearDown; "docker" means Docker's own bridge does it.
 */
export interface PodNetwork extends NetworkReadinessSource {
  readonly kind: "cni" | "docker";
  setUp(request: PodNetworkRequest, signal?: AbortSignal): Promise<PodNetworkAttachment>;
  /**
   * Idempotent: detaching a pod that is not (or no longer) attached succeeds.
   * Fails when the pod's network cannot be released; with `force` it gives
   * up instead, forgets the pod, and returns what failed (else []).
   */
  tearDown(request: PodNetworkRequest, options?: TearDownOptions): Promise<string[]>;
  close(): Promise<void>;
  /**
   * Takes over a pod another runtime attached (cri-dockerd): makes sure a
   * DEL for it will find its network, config and CNI_ARGS (the ADD cache
   * entry libcni wrote, else, when `createIfMissing`, one written now from
   * the current config and `cniArgs`). CNI only. undefined: no entry.
   */
  adopt?(
    request: PodNetworkRequest,
    cniArgs: [string, string][],
    /** Write an entry when there is none; the addresses seen in the namespace (CIDR form) give its result. */
    createFrom: { addresses: string[] } | undefined,
  ): Promise<{ networkName: string; result: unknown } | undefined>;
}

/** --network-plugin=no-op: Docker's default bridge; there is nothing to set up or tear down here. */
export class DockerBridgeNetwork extends NoopNetwork implements PodNetwork {
  readonly kind = "docker" as const;
  async setUp(): Promise<PodNetworkAttachment> {
    throw new Error("the no-op network plugin leaves pod networking to Docker; setUp must not be called");
  }
  async tearDown(): Promise<string[]> {
    return [];
  }
  async close(): Promise<void> {}
}
