/**
 * Whether this node can run a pod in its own user namespace (KEP-127,
 * `hostUsers: false`), and if not, which part it lacks. Status reports the
 * answer as the default runtime handler's `user_namespaces` feature, so
 * kubelet refuses such pods cleanly where the answer is no; RunPodSandbox
 * refuses them with FAILED_PRECONDITION naming the part.
 *
 * The parts (idmapped-rootfs.ts says why each):
 * - cridock's OCI runtime layer, in a launcher that has a rootfs directory;
 * - Linux 6.3 or newer: overlayfs over idmapped layers (5.19), and idmapped
 *   tmpfs, where kubelet keeps projected, secret and configMap volumes (6.3);
 * - util-linux's mount 2.39 or newer, for `X-mount.idmap`;
 * - an overlay rootfs: Docker's overlay2 driver or containerd's overlayfs
 *   snapshotter;
 * - no daemon-wide `userns-remap`, which would map every container already;
 * - Engine API 1.43 (Docker 24) or newer, whose HostConfig.Annotations reach
 *   the spec: the mark by which the launcher refuses such a container
 *   started without cridock (runtime/pod-userns.ts).
 */
import { release } from "node:os";
import { compareApiVersions } from "../docker/api-version.ts";
import type { DockerInfo } from "../docker/types.ts";
import { execFile } from "node:child_process";
import { kernelAtLeast } from "../kernel-release.ts";
import { LAYER_INSTALL_HINT, type OciLayer } from "./layer.ts";

export type UsernsSupport = { ok: true; layer: OciLayer } | { ok: false; reason: string };

/** Storage drivers whose rootfs is an overlay with its layers in its options. */
const OVERLAY_DRIVERS = new Set(["overlay2", "overlayfs"]);

/** The version util-linux's `mount --version` prints ("mount from util-linux 2.41 (libmount …)"), or undefined. */
export function utilLinuxVersion(text: string): [number, number] | undefined {
  const m = /util-linux (\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/** The node's answer from its parts; pure, for the tests. */
/** What of dockerd the answer depends on. */
export type EngineFacts = Pick<DockerInfo, "Driver" | "SecurityOptions"> & { apiVersion: string };

export function judgeUserns(parts: { layer?: OciLayer; kernel: string; mountVersion?: [number, number]; info: EngineFacts }): UsernsSupport {
  const { layer, kernel, mountVersion, info } = parts;
  if (!layer) return { ok: false, reason: `cridock's OCI runtime layer is not registered with dockerd: ${LAYER_INSTALL_HINT}` };
  if (!layer.rootfsDir) return { ok: false, reason: "cridock's OCI runtime layer was installed by a cridock from before user namespaces: run `cridock oci-layer install` again" };
  if (!kernelAtLeast(kernel, 6, 3)) return { ok: false, reason: `Linux ${kernel} is older than 6.3, which idmapped overlay layers and tmpfs volumes need` };
  if (!mountVersion) return { ok: false, reason: "util-linux's mount (2.39 or newer, for idmapped mounts) was not found" };
  if (mountVersion[0] < 2 || (mountVersion[0] === 2 && mountVersion[1] < 39)) {
    return { ok: false, reason: `util-linux's mount is ${mountVersion.join(".")}, older than 2.39, which idmapped mounts need` };
  }
  if (!OVERLAY_DRIVERS.has(info.Driver)) return { ok: false, reason: `dockerd's storage driver is ${info.Driver}, not overlay2 (or containerd's overlayfs snapshotter), whose layers can be idmapped` };
  if (compareApiVersions(info.apiVersion, "1.43") < 0) return { ok: false, reason: `dockerd speaks Engine API ${info.apiVersion}, older than 1.43 (Docker 24), whose annotations mark a pod's containers for the layer` };
  if ((info.SecurityOptions ?? []).some((o) => o.split(",").includes("name=userns"))) {
    return { ok: false, reason: "dockerd runs with userns-remap, which maps every container into one namespace of its own" };
  }
  return { ok: true, layer };
}

/** `mount --version`'s output, or undefined when there is no mount to run (once a minute at most: a plain spawn). */
function mountVersionText(): Promise<string | undefined> {
  return new Promise((done) => execFile("mount", ["--version"], { timeout: 10_000 }, (err, stdout) => done(err ? undefined : String(stdout))));
}

/** How long an answer stands: a package upgrade (util-linux, the layer) is seen within it. */
const TTL_MS = 60_000;

export class UsernsSupportProbe {
  private cached?: { value: UsernsSupport; at: number };
  private pending?: Promise<UsernsSupport>;

  constructor(
    private readonly layer: () => Promise<OciLayer | undefined>,
    private readonly info: () => Promise<EngineFacts>,
  ) {}

  async current(): Promise<UsernsSupport> {
    if (this.cached && Date.now() - this.cached.at < TTL_MS) return this.cached.value;
    this.pending ??= this.probe().finally(() => (this.pending = undefined));
    const value = await this.pending;
    this.cached = { value, at: Date.now() };
    return value;
  }

  private async probe(): Promise<UsernsSupport> {
    const [layer, info, mount] = await Promise.all([this.layer(), this.info(), mountVersionText()]);
    return judgeUserns({ layer, kernel: release(), mountVersion: mount === undefined ? undefined : utilLinuxVersion(mount), info });
  }
}
