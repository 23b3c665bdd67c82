/**
 * Runtime identity and health: what Version, Status and RuntimeConfig report.
 * RuntimeReady is a live ping of dockerd, so Status turns false while dockerd
 * is down and true again when it is back, with no restart of cridock.
 */
import type { DockerClient } from "../docker/client.ts";
import { describeCause } from "../errors.ts";
import type { NetworkReadinessSource } from "../network/plugin.ts";
import { compareApiVersions } from "../docker/api-version.ts";

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

export class RuntimeStatus {
  constructor(
    private readonly docker: DockerClient,
    private readonly network: NetworkReadinessSource,
  ) {}

  /** dockerd's version string, e.g. "20.10.24+dfsg1". */
  async runtimeVersion(): Promise<string> {
    return (await this.docker.version()).Version;
  }

  async conditions(): Promise<Condition[]> {
    let runtime: Condition;
    try {
      await this.docker.ping();
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
    const info = await this.docker.info();
    return info.CgroupDriver === "systemd" ? "systemd" : "cgroupfs";
  }

  /**
   * The default handler ("") plus Docker's named runtimes. Recursive read-only
   * mounts need Engine API 1.44 (ReadOnlyForceRecursive) and kernel 5.12.
   */
  async runtimeHandlers(): Promise<RuntimeHandlerInfo[]> {
    const [info, api] = await Promise.all([this.docker.info(), this.docker.apiVersion()]);
    const rro = compareApiVersions(api, "1.44") >= 0 && kernelAtLeast(info.KernelVersion ?? "", 5, 12);
    const names = ["", ...Object.keys(info.Runtimes ?? {}).sort()];
    return names.map((name) => ({ name, recursiveReadOnlyMounts: rro, userNamespaces: false }));
  }

  setPodCidr(cidr: string): void {
    this.network.setPodCidr(cidr);
  }
}

export function kernelAtLeast(release: string, major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return false;
  const [maj, min] = [Number(m[1]), Number(m[2])];
  return maj > major || (maj === major && min >= minor);
}
