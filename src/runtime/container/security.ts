/**
 * A container's security context → Docker's User, GroupAdd, capabilities,
 * SecurityOpt (seccomp, AppArmor, SELinux, no-new-privileges), masked and
 * read-only paths.
 *
 * Seccomp with no profile given is `unconfined`, as in cri-dockerd and as the
 * CRI specifies; RuntimeDefault is Docker's default profile; Localhost passes
 * the file's JSON. AppArmor profiles are checked at create time because
 * Docker only notices a missing profile when the container starts.
 */
import { readFile } from "node:fs/promises";
import type { HostConfig } from "../../docker/types.ts";
import { failedPrecondition, invalidArgument, unimplemented } from "../../errors.ts";
import { expandAll, hostCapabilities, type HostCapabilities } from "./capabilities.ts";
import type { SecurityProfile, SecuritySpec } from "./spec.ts";

export interface SecurityHostConfig {
  user?: string;
  host: Pick<
    HostConfig,
    "Privileged" | "ReadonlyRootfs" | "CapAdd" | "CapDrop" | "GroupAdd" | "SecurityOpt" | "MaskedPaths" | "ReadonlyPaths"
  >;
}

const APPARMOR_ENABLED = "/sys/module/apparmor/parameters/enabled";
const APPARMOR_PROFILES = "/sys/kernel/security/apparmor/profiles";

export interface HostSecurity {
  /** Names of the loaded AppArmor profiles, or undefined when AppArmor is off. */
  apparmorProfiles(): Promise<Set<string> | undefined>;
  readSeccompProfile(path: string): Promise<string>;
  /** The capabilities cridock's bounding set can grant (see capabilities.ts). */
  capabilities(): Promise<HostCapabilities>;
}

export const hostSecurity: HostSecurity = {
  async apparmorProfiles() {
    const enabled = await readFile(APPARMOR_ENABLED, "utf8").catch(() => "N");
    if (!enabled.trim().startsWith("Y")) return undefined;
    const text = await readFile(APPARMOR_PROFILES, "utf8").catch(() => "");
    // Lines look like "name (enforce)".
    return new Set(text.split("\n").map((l) => l.replace(/ \([a-z]+\)$/, "").trim()).filter(Boolean));
  },
  readSeccompProfile: (path) => readFile(path, "utf8"),
  capabilities: hostCapabilities,
};

const CAPABILITY = /^(CAP_)?[A-Z_]+$/;

export function validateSecurity(sc: SecuritySpec): void {
  if (sc.runAsGroup !== undefined && sc.runAsUser === undefined && !sc.runAsUsername) {
    throw invalidArgument("run_as_group is set without run_as_user or run_as_username");
  }
  if (sc.runAsUser !== undefined && sc.runAsUsername) {
    throw invalidArgument("run_as_user and run_as_username are both set; give one");
  }
  for (const id of [sc.runAsUser, sc.runAsGroup, ...sc.supplementalGroups]) {
    if (id !== undefined && (id < 0n || id > 4294967294n)) throw invalidArgument(`user/group id ${id} is out of range`);
  }
  if (sc.runAsUsername && !/^[a-zA-Z0-9_.][a-zA-Z0-9_.-]*\$?$/.test(sc.runAsUsername)) {
    throw invalidArgument(`run_as_username "${sc.runAsUsername}" is not a user name`);
  }
  for (const cap of [...sc.capAdd, ...sc.capDrop]) {
    if (cap.toUpperCase() !== "ALL" && !CAPABILITY.test(cap)) throw invalidArgument(`"${cap}" is not a capability name`);
  }
  if (sc.capAddAmbient.length > 0) throw unimplemented("ambient capabilities are not supported on Docker");
  if (sc.pidMode === "target" && !sc.targetId) throw invalidArgument("PID namespace mode TARGET needs target_id");
  for (const path of [...sc.maskedPaths, ...sc.readonlyPaths]) {
    if (!path.startsWith("/")) throw invalidArgument(`masked/readonly path "${path}" must be absolute`);
  }
  if (sc.seccomp?.kind === "localhost" && !sc.seccomp.localhostRef.startsWith("/")) {
    throw invalidArgument(`seccomp localhost profile "${sc.seccomp.localhostRef}" must be an absolute file path`);
  }
}

export async function securityHostConfig(sc: SecuritySpec, host: HostSecurity = hostSecurity): Promise<SecurityHostConfig> {
  const capAdd = sc.capAdd.some((c) => c.toUpperCase() === "ALL") ? expandAll(sc.capAdd, sc.capDrop, await host.capabilities()) : sc.capAdd;
  const securityOpt: string[] = [];
  if (sc.noNewPrivs) securityOpt.push("no-new-privileges");
  if (!sc.privileged) {
    // Docker ignores seccomp for privileged containers; do not even read the file.
    const seccomp = await seccompOption(sc.seccomp, host);
    if (seccomp) securityOpt.push(seccomp);
  }
  const apparmor = await apparmorOption(sc.apparmor, host);
  if (apparmor) securityOpt.push(apparmor);
  if (sc.selinux) {
    for (const [key, value] of Object.entries(sc.selinux)) if (value) securityOpt.push(`label=${key}:${value}`);
  }
  const result: SecurityHostConfig = {
    user: userString(sc),
    host: {
      Privileged: sc.privileged,
      ReadonlyRootfs: sc.readonlyRootfs,
      CapAdd: capAdd.length ? capAdd : undefined,
      CapDrop: sc.capDrop.length ? sc.capDrop : undefined,
      GroupAdd: sc.supplementalGroups.length ? sc.supplementalGroups.map(String) : undefined,
      SecurityOpt: securityOpt.length ? securityOpt : undefined,
    },
  };
  // Empty lists keep Docker's defaults; a privileged container has none anyway.
  if (!sc.privileged && sc.maskedPaths.length) result.host.MaskedPaths = sc.maskedPaths;
  if (!sc.privileged && sc.readonlyPaths.length) result.host.ReadonlyPaths = sc.readonlyPaths;
  return result;
}

/** Docker's User: "uid", "name", "uid:gid" or "name:gid"; undefined keeps the image's USER. */
export function userString(sc: SecuritySpec): string | undefined {
  const user = sc.runAsUser !== undefined ? String(sc.runAsUser) : sc.runAsUsername;
  if (!user) return undefined;
  return sc.runAsGroup !== undefined ? `${user}:${sc.runAsGroup}` : user;
}

async function seccompOption(profile: SecurityProfile | undefined, host: HostSecurity): Promise<string | undefined> {
  if (!profile || profile.kind === "unconfined") return "seccomp=unconfined";
  if (profile.kind === "runtime-default") return undefined;
  let text: string;
  try {
    text = await host.readSeccompProfile(profile.localhostRef);
  } catch (err) {
    throw invalidArgument(`cannot read seccomp profile ${profile.localhostRef}`, err);
  }
  try {
    // Compact JSON: Docker takes the profile inline in the option.
    return `seccomp=${JSON.stringify(JSON.parse(text))}`;
  } catch (err) {
    throw invalidArgument(`seccomp profile ${profile.localhostRef} is not valid JSON`, err);
  }
}

async function apparmorOption(profile: SecurityProfile | undefined, host: HostSecurity): Promise<string | undefined> {
  if (!profile || profile.kind === "runtime-default") return undefined;
  if (profile.kind === "unconfined") return "apparmor=unconfined";
  const name = profile.localhostRef.replace(/^localhost\//, "");
  if (!name) throw invalidArgument("AppArmor localhost profile has no name");
  const loaded = await host.apparmorProfiles();
  if (!loaded) throw failedPrecondition(`AppArmor profile ${name} was requested but AppArmor is not enabled on this host`);
  if (!loaded.has(name)) throw failedPrecondition(`AppArmor profile ${name} is not loaded; load it with apparmor_parser first`);
  return `apparmor=${name}`;
}
