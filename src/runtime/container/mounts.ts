/**
 * CRI mounts and devices → Docker Binds, Mounts and Devices.
 *
 * A CRI `readonly` mount is read-only at its own mount only: mounts below
 * the host path stay as they are, unless `recursive_read_only` asks for
 * every one of them to be read-only too. Docker's Binds `ro` meant exactly
 * the former up to Engine API 1.43; from 1.44 on, dockerd makes a `ro` bind
 * recursively read-only where the kernel allows. So on 1.44 and newer the
 * mounts go through the Mount API, whose bind options say which is meant
 * (ReadOnlyNonRecursive, ReadOnlyForceRecursive) and create a missing host
 * directory (CreateMountpoint) as Binds do; older engines get Binds, and
 * recursive read-only is refused there. A mount that asks for SELinux
 * relabelling stays a Bind (`z` exists only there), with Docker's own
 * meaning of `ro` on that engine, when the engine relabels at all (its info
 * lists "name=selinux"); elsewhere `z` does nothing and the request is
 * carried out like any other mount (critest asks for it on every host).
 *
 * A host path that does not exist is created as a directory (0755) before
 * the container is, as containerd's CRI plugin does and Docker's Binds did:
 * kubelet checks a hostPath volume of type "" for nothing (kube-proxy's
 * /lib/modules on a host without modules), and the Mount API refuses a
 * missing source unless the engine honours CreateMountpoint.
 *
 * A host path that is a symlink is resolved first, since the kernel would
 * otherwise mount the link's target under a name Docker never checked;
 * ContainerStatus still reports the paths exactly as requested (kept in a
 * label by container/create.ts).
 */
import { mkdir, realpath } from "node:fs/promises";
import { compareApiVersions } from "../../docker/api-version.ts";
import type { DeviceMapping, DockerMount } from "../../docker/types.ts";
import { failedPrecondition, invalidArgument, unimplemented } from "../../errors.ts";
import type { DeviceSpec, MountSpec } from "./spec.ts";
import { mountOptionsProblem } from "../../oci/mount-options.ts";

/**
 * A private mount names no propagation and takes Docker's default: rprivate,
 * except for a host path that holds Docker's data root or lies inside it
 * (hostPath "/" or "/var/lib", as node agents and cAdvisor mount them), where
 * dockerd picks rslave so that its own later mounts (other containers' root
 * filesystems) are not pinned inside this container, and refuses an explicit
 * rprivate ("must use either propagation mode rslave or rshared when mount
 * source is within the daemon root"). cri-dockerd leaves it unset too.
 */
const PROPAGATION: Record<MountSpec["propagation"], "rslave" | "rshared" | undefined> = {
  private: undefined,
  "host-to-container": "rslave",
  bidirectional: "rshared",
};

/** Rejects relative paths, `..` segments, and characters a Bind cannot carry. */
export function checkPath(path: string, what: string): void {
  if (!path) throw invalidArgument(`${what} is empty`);
  if (!path.startsWith("/")) throw invalidArgument(`${what} "${path}" must be an absolute path`);
  if (path.split("/").includes("..")) throw invalidArgument(`${what} "${path}" must not contain ".." segments`);
  if (path.includes("\0")) throw invalidArgument(`${what} contains a NUL byte`);
  if (path.includes(":")) throw invalidArgument(`${what} "${path}" contains ":", which Docker bind mounts cannot express`);
}

export function validateMounts(mounts: readonly MountSpec[]): void {
  const targets = new Set<string>();
  for (const m of mounts) {
    const target = m.containerPath.replace(/\/+$/, "") || "/";
    if (targets.has(target)) throw invalidArgument(`two mounts target ${target}`);
    targets.add(target);
    checkMountOptions(m);
    // Image volumes have no host path; image-mounts.ts checks them.
    if (m.image) continue;
    checkPath(m.containerPath, "mount container_path");
    checkPath(m.hostPath, `mount host_path for ${m.containerPath}`);
    if (m.recursiveReadOnly) {
      if (!m.readonly) throw invalidArgument(`mount ${m.containerPath}: recursive_read_only needs readonly`);
      if (m.propagation !== "private") {
        throw invalidArgument(`mount ${m.containerPath}: recursive_read_only needs private propagation`);
      }
    }
  }
}

/**
 * A mount's bind mount options (mount_options) are what kubelet allows:
 * noexec, nodev, nosuid, each at most once. An image volume takes none:
 * kubelet's validation refuses them there, and Docker's image mounts could
 * not carry them.
 */
function checkMountOptions(m: MountSpec): void {
  const options = m.mountOptions ?? [];
  if (options.length === 0) return;
  const what = m.image ? `image volume ${m.containerPath} (${m.image})` : `mount ${m.containerPath}`;
  if (m.image) throw invalidArgument(`${what} has mount options ${options.join(", ")}: image volumes take no bind mount options`);
  const problem = mountOptionsProblem(options);
  if (problem) throw invalidArgument(`${what}: ${problem}`);
}

/**
 * Creates each missing host path as a directory (parents too, 0755).
 * Returns the paths it created. A path that exists (as anything) is left
 * alone; one that cannot be created (a parent is a file, a dangling
 * symlink, a read-only filesystem) is FAILED_PRECONDITION with the cause.
 */
export async function createMissingHostPaths(mounts: readonly MountSpec[]): Promise<string[]> {
  const created: string[] = [];
  for (const m of mounts) {
    // An image volume has no host path.
    if (m.image) continue;
    const missing = await realpath(m.hostPath).then(
      () => false,
      (err: NodeJS.ErrnoException) => err.code === "ENOENT",
    );
    if (!missing) continue;
    try {
      await mkdir(m.hostPath, { recursive: true, mode: 0o755 });
      // A dangling symlink "exists" to mkdir: only a path that now resolves counts.
      await realpath(m.hostPath);
    } catch (err) {
      throw failedPrecondition(`mount ${m.containerPath}: host path ${m.hostPath} does not exist and cannot be created as a directory`, err);
    }
    created.push(m.hostPath);
  }
  return created;
}

/** The Engine API version from which the Mount API's read-only bind options exist. */
export const READ_ONLY_BIND_OPTIONS_API = "1.44";

export interface DockerMounts {
  binds: string[];
  mounts: DockerMount[];
}

/**
 * Docker Binds and Mounts for the mounts on an engine speaking `apiVersion`
 * (and relabelling for SELinux, or not), host symlinks resolved. Throws UNIMPLEMENTED for recursive read-only on an
 * engine older than 1.44.
 */
export async function dockerMountsFor(mounts: readonly MountSpec[], apiVersion: string, engineRelabels: boolean): Promise<DockerMounts> {
  const mountApi = compareApiVersions(apiVersion, READ_ONLY_BIND_OPTIONS_API) >= 0;
  const result: DockerMounts = { binds: [], mounts: [] };
  for (const m of mounts) {
    // Image volumes become image mounts (image-mounts.ts), once their image is resolved.
    if (m.image) continue;
    if (m.recursiveReadOnly && !mountApi) {
      throw unimplemented(
        `mount ${m.containerPath}: recursive read-only mounts need Docker Engine API ${READ_ONLY_BIND_OPTIONS_API}; this engine speaks ${apiVersion}`,
      );
    }
    // Missing host paths were created by createMissingHostPaths; a path that vanished since is Docker's to refuse.
    const source = await realpath(m.hostPath).catch(() => m.hostPath);
    if (source.includes(":")) throw invalidArgument(`mount host_path ${m.hostPath} resolves to "${source}", which contains ":"`);
    const relabel = m.selinuxRelabel && engineRelabels;
    const propagation = PROPAGATION[m.propagation];
    if (mountApi && !relabel) {
      result.mounts.push({
        Type: "bind",
        Source: source,
        Target: m.containerPath,
        ReadOnly: m.readonly,
        BindOptions: {
          ...(propagation ? { Propagation: propagation } : {}),
          CreateMountpoint: true,
          ...(m.readonly && !m.recursiveReadOnly ? { ReadOnlyNonRecursive: true } : {}),
          ...(m.recursiveReadOnly ? { ReadOnlyForceRecursive: true } : {}),
        },
      });
      continue;
    }
    const options = [m.readonly ? "ro" : "rw", ...(propagation ? [propagation] : [])];
    if (relabel) options.push("z");
    result.binds.push(`${source}:${m.containerPath}:${options.join(",")}`);
  }
  return result;
}

export function validateDevices(devices: readonly DeviceSpec[]): void {
  for (const d of devices) {
    checkPath(d.hostPath, "device host_path");
    checkPath(d.containerPath, "device container_path");
    if (d.permissions && !/^[rwm]{1,3}$/.test(d.permissions)) {
      throw invalidArgument(`device ${d.hostPath}: permissions "${d.permissions}" must be a combination of r, w and m`);
    }
  }
}

export function deviceMappings(devices: readonly DeviceSpec[]): DeviceMapping[] {
  return devices.map((d) => ({
    PathOnHost: d.hostPath,
    PathInContainer: d.containerPath,
    CgroupPermissions: d.permissions || "rwm",
  }));
}
