/**
 * CRI mounts and devices → Docker Binds and Devices.
 *
 * Binds (not Mounts) because only they carry SELinux relabelling (`z`) and
 * create a missing host directory, as dockershim did. A host path that is a
 * symlink is resolved first, since the kernel would otherwise mount the link's
 * target under a name Docker never checked; ContainerStatus still reports the
 * paths exactly as requested (kept in a label by container/create.ts).
 */
import { realpath } from "node:fs/promises";
import type { DeviceMapping } from "../../docker/types.ts";
import { invalidArgument, unimplemented } from "../../errors.ts";
import type { DeviceSpec, MountSpec } from "./spec.ts";

const PROPAGATION: Record<MountSpec["propagation"], string> = {
  private: "rprivate",
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
    if (m.image) throw unimplemented(`image volume mounts (image ${m.image} at ${m.containerPath}) are not supported on Docker`);
    if (m.idMappings) throw unimplemented(`mount ${m.containerPath}: uid/gid mappings are not supported on Docker`);
    checkPath(m.containerPath, "mount container_path");
    checkPath(m.hostPath, `mount host_path for ${m.containerPath}`);
    if (m.recursiveReadOnly) {
      if (!m.readonly) throw invalidArgument(`mount ${m.containerPath}: recursive_read_only needs readonly`);
      if (m.propagation !== "private") {
        throw invalidArgument(`mount ${m.containerPath}: recursive_read_only needs private propagation`);
      }
      throw unimplemented(`mount ${m.containerPath}: recursive read-only mounts need Docker Engine API 1.44`);
    }
    const target = m.containerPath.replace(/\/+$/, "") || "/";
    if (targets.has(target)) throw invalidArgument(`two mounts target ${target}`);
    targets.add(target);
  }
}

/** Docker Binds for the mounts, host symlinks resolved. */
export async function bindsFor(mounts: readonly MountSpec[]): Promise<string[]> {
  const binds: string[] = [];
  for (const m of mounts) {
    // A missing host path is created by Docker (as a directory), like dockershim did.
    const source = await realpath(m.hostPath).catch(() => m.hostPath);
    if (source.includes(":")) throw invalidArgument(`mount host_path ${m.hostPath} resolves to "${source}", which contains ":"`);
    const options = [m.readonly ? "ro" : "rw", PROPAGATION[m.propagation]];
    if (m.selinuxRelabel) options.push("z");
    binds.push(`${source}:${m.containerPath}:${options.join(",")}`);
  }
  return binds;
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
