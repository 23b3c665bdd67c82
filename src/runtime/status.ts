/**
 * Runtime identity and health: what Version, Status and RuntimeConfig report.
 *
 * Version and Status answer from memory while Docker's event stream is
 * connected (a connected stream is a live dockerd): kubelet calls them on
 * every sync loop and on timers, and they must not wait behind whatever else
 * cridock asks of dockerd. dockerd's version is read once per stream epoch
 * (a restarted daemon may be another version). While the stream is down,
 * both ask dockerd live, so Status turns false while dockerd is down and
 * true again when it is back, with no restart of cridock.
 */
import type { DockerClient } from "../docker/client.ts";
import { describeCause } from "../errors.ts";
import type { NetworkReadinessSource } from "../network/plugin.ts";
import { compareApiVersions } from "../docker/api-version.ts";
import type { DockerInfo } from "../docker/types.ts";
import type { UsernsSupport } from "../oci/userns-support.ts";
import type { MountOptionsSupport } from "../oci/mount-options.ts";
import { kernelAtLeast } from "../kernel-release.ts";

export const RUNTIME_NAME = "docker";

export interface Condition {
  type: "RuntimeReady" | "NetworkReady";
  status: boolean;
  reason: string;
  message: string;
}

export interface RuntimeHandlerInfo {
  name: string;
  recursiveReadOnlyMounts: boolean;
  userNamespaces: boolean;
}

export interface RuntimeFeaturesInfo {
  mountOptions: boolean;
}

/** How long Status' runtime-wide features stand before they are asked again. */
const FEATURES_TTL_MS = 60_000;

export class RuntimeStatus {
  private features: { value: RuntimeFeaturesInfo; at: number } | undefined;
  private featuresPending: Promise<RuntimeFeaturesInfo> | undefined;
  private version: { epoch: number; text: Promise<string> } | undefined;
  private info: { epoch: number; value: Promise<DockerInfo> } | undefined;

  constructor(
    private readonly docker: DockerClient,
    private readonly network: NetworkReadinessSource,
    /** Keeps the pod CIDR for the next start (store/pod-cidr.ts). */
    private readonly savePodCidr?: (cidr: string) => Promise<void>,
    /** Whether pods can have their own user namespace (oci/userns-support.ts). */
    private readonly userns?: () => Promise<UsernsSupport>,
    /** Whether the node honours bind mount options (oci/mount-options.ts). */
    private readonly mountOptions?: () => Promise<MountOptionsSupport>,
  ) {}

  /**
   * Reads dockerd's version and info as soon as the event stream (re)connects,
   * so that the first Version after a start or a dockerd restart is answered
   * from memory. kubeadm's preflight gives Version 2 seconds, which a slow
   * node's dockerd can spend on its own. Returns the unsubscribe function.
   */
  prefetchOnConnect(): () => void {
    const prefetch = () => {
      // Failures only leave the cache empty: the next call asks again.
      this.runtimeVersion().catch(() => undefined);
      this.dockerInfo().catch(() => undefined);
    };
    const unsubscribe = this.docker.events.onConnection((connected) => connected && prefetch());
    if (this.live() !== undefined) prefetch();
    return unsubscribe;
  }

  /** Whether the event stream vouches for dockerd (and which epoch of it). */
  private live(): number | undefined {
    return this.docker.events.connected ? this.docker.events.epoch : undefined;
  }

  /** dockerd's version string, e.g. "20.10.24+dfsg1". */
  async runtimeVersion(): Promise<string> {
    const epoch = this.live();
    if (epoch === undefined) return (await this.docker.version()).Version;
    if (this.version?.epoch !== epoch) {
      const text = this.docker.version().then((v) => v.Version);
      const entry = { epoch, text };
      this.version = entry;
      text.catch(() => {
        if (this.version === entry) this.version = undefined;
      });
    }
    return this.version.text;
  }

  /** `docker info`, cached like the version (runtime handlers and the cgroup driver come from it). */
  private dockerInfo(): Promise<DockerInfo> {
    const epoch = this.live();
    if (epoch === undefined) return this.docker.info();
    if (this.info?.epoch !== epoch) {
      const value = this.docker.info();
      const entry = { epoch, value };
      this.info = entry;
      value.catch(() => {
        if (this.info === entry) this.info = undefined;
      });
    }
    return this.info.value;
  }

  async conditions(): Promise<Condition[]> {
    let runtime: Condition;
    try {
      if (this.live() === undefined) await this.docker.ping();
      runtime = { type: "RuntimeReady", status: true, reason: "", message: "" };
    } catch (err) {
      runtime = {
        type: "RuntimeReady",
        status: false,
        reason: "DockerDaemonNotReady",
        message: `dockerd does not answer: ${describeCause(err)}`,
      };
    }
    const net = this.network.readiness();
    const network: Condition = {
      type: "NetworkReady",
      status: net.ready,
      reason: net.ready ? "" : (net.reason ?? "NetworkPluginNotReady"),
      message: net.ready ? "" : (net.message ?? "network plugin is not ready"),
    };
    return [runtime, network];
  }

  async cgroupDriver(): Promise<"systemd" | "cgroupfs"> {
    const info = await this.dockerInfo();
    return info.CgroupDriver === "systemd" ? "systemd" : "cgroupfs";
  }

  /**
   * The default handler ("") plus Docker's named runtimes. Recursive read-only
   * mounts need Engine API 1.44 (ReadOnlyForceRecursive) and kernel 5.12.
   * User namespaces go through cridock's runtime layer, which hands every
   * container to the default runtime: the default handler has them where
   * the node can do it, a named one never.
   */
  async runtimeHandlers(): Promise<RuntimeHandlerInfo[]> {
    const [info, api, userns] = await Promise.all([this.dockerInfo(), this.docker.apiVersion(), this.userns?.().catch(() => undefined)]);
    const rro = compareApiVersions(api, "1.44") >= 0 && kernelAtLeast(info.KernelVersion ?? "", 5, 12);
    const names = ["", ...Object.keys(info.Runtimes ?? {}).sort()];
    return names.map((name) => ({ name, recursiveReadOnlyMounts: rro, userNamespaces: name === "" && userns?.ok === true }));
  }

  /**
   * The runtime-wide features (Status' RuntimeFeatures) that depend on the
   * node. Bind mount options (KEP-5855) go through cridock's OCI runtime
   * layer, so they are declared only where it is registered and works;
   * kubelet then refuses pods that ask for them on a node without it,
   * rather than cridock running their volumes without the options. An
   * answer that cannot be had is no. The answer stands FEATURES_TTL_MS:
   * kubelet asks Status every few seconds, and a quiet node's calls ask
   * dockerd nothing (the layer's lookup asks /info); a layer installed
   * meanwhile is declared within that time.
   */
  async runtimeFeatures(now = Date.now()): Promise<RuntimeFeaturesInfo> {
    const cached = this.features;
    if (cached && now - cached.at < FEATURES_TTL_MS) return cached.value;
    this.featuresPending ??= (async () => {
      const answer = await this.mountOptions?.().catch(() => undefined);
      return { mountOptions: answer?.ok === true };
    })().finally(() => (this.featuresPending = undefined));
    const value = await this.featuresPending;
    this.features = { value, at: now };
    return value;
  }

  /** Takes kubelet's pod CIDR at once, and keeps it for the next start (a failed save fails the call: kubelet retries). */
  async setPodCidr(cidr: string): Promise<void> {
    this.network.setPodCidr(cidr);
    await this.savePodCidr?.(cidr);
  }
}

