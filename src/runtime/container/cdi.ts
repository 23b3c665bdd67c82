/**
 * CDI devices (ContainerConfig.CDI_devices) → Docker's
 * `HostConfig.DeviceRequests[{Driver:"cdi", DeviceIDs:[…]}]`. dockerd's CDI
 * driver (Docker 25 and newer) reads the specs from its CDI spec
 * directories and injects the device nodes, mounts, environment and hooks
 * when the container starts.
 *
 * Whether the engine can is read from GET /info: `CDISpecDirs` lists the
 * directories when its CDI support is on, and is empty (or, before Engine
 * API 1.44, absent) when it is not. Docker 29 has it on by default; it is
 * turned off with the daemon feature `cdi: false`.
 */
import type { DeviceRequest, DockerInfo } from "../../docker/types.ts";
import { failedPrecondition, invalidArgument } from "../../errors.ts";

/**
 * A fully qualified CDI device name, `vendor.com/class=name` (the CDI
 * specification's grammar: a vendor domain, a class, and a device name that
 * may also hold ':' and '.').
 */
const CDI_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\/[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?=[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$/;

export function validateCdiDevices(names: readonly string[]): void {
  for (const name of names) {
    if (!CDI_NAME.test(name)) {
      throw invalidArgument(`CDI device "${name.slice(0, 200)}" is not a fully qualified CDI device name (vendor.com/class=name)`);
    }
  }
}

/** FAILED_PRECONDITION unless the engine reports its CDI support on. */
export function requireCdi(info: Pick<DockerInfo, "CDISpecDirs" | "ServerVersion">, apiVersion: string, names: readonly string[]): void {
  if ((info.CDISpecDirs ?? []).length > 0) return;
  throw failedPrecondition(
    `CDI devices (${names.join(", ")}) need a Docker engine whose CDI support is on (Docker 25 or newer, Engine API 1.44 or newer, reporting CDI spec directories in /info; turn it on with the daemon feature "cdi"); this engine is Docker ${info.ServerVersion} with Engine API ${apiVersion} and reports no CDI spec directories`,
  );
}

export function cdiDeviceRequests(names: readonly string[]): DeviceRequest[] {
  return names.length > 0 ? [{ Driver: "cdi", DeviceIDs: [...names] }] : [];
}
