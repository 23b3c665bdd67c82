/**
 * What cridock adds to a container's OCI spec through its runtime layer
 * (launcher.ts): the parts of kubelet's request that Docker's API has no
 * field for.
 * - The cgroup v2 `unified` map's keys that no HostConfig field carries
 *   (container/unified.ts decides which), put in `linux.resources.unified`,
 *   where runc writes them into the container's cgroup before its first
 *   process runs.
 * - A pod's user namespace: its mappings, a new namespace for the sandbox
 *   and the sandbox's for every other container of the pod, with the
 *   rootfs and the named volumes idmapped (idmapped-rootfs.ts prepares
 *   them; applyUserns puts them in the spec).
 * - Bind mount options kubelet asks for a volume (noexec, nodev, nosuid;
 *   mount-options.ts), added to that mount's `options` beside its own
 *   (applyMountOptions).
 *
 * The edits file is read by a process Docker starts as root, so it is
 * treated as hostile: parseSpecEdits takes only the known shape, with every
 * key and value checked as CreateContainer checks them.
 */
import { posix } from "node:path";
import { isUnifiedKey, UNIFIED_VALUE_MAX } from "../cgroup-unified-keys.ts";
import { highestMappedId, mappingsProblem, ociMappings, parseMappings, type UsernsMappings } from "./id-mappings.ts";
import { CONTRARY_OPTION, mountOptionsProblem, type BindMountOption } from "./mount-options.ts";

export const SPEC_EDITS_VERSION = 1;

export interface SpecEdits {
  version: typeof SPEC_EDITS_VERSION;
  /** cgroup v2 interface file → value, merged over what the spec has. */
  unified?: Record<string, string>;
  userns?: UsernsEdit;
  /** Bind mount options to add, per mount (by its container path). */
  mountOptions?: MountOptionsEdit[];
}

export interface MountOptionsEdit {
  /** The mount's container path, as kubelet gave it. */
  destination: string;
  options: BindMountOption[];
}

export interface UsernsEdit extends UsernsMappings {
  /**
   * false for the pod's sandbox, which gets a new user namespace; true for
   * the pod's other containers, which join the sandbox's (found through the
   * sandbox's network namespace, which they join already).
   */
  join: boolean;
  /** Container paths of the bind mounts (kubelet's volumes) to idmap, so the pod's ids own their files. */
  idmapMounts: string[];
}

/** The longest container path, and the most mounts, an edit may name. */
const PATH_MAX = 4096;
const MOUNTS_MAX = 1024;

function parseUserns(value: unknown): UsernsEdit {
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error("the spec edits' userns is not an object");
  const { join, idmapMounts, uids, gids, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`the spec edits' userns carries ${unknown.join(", ")}, which this layer does not know: cridock and its layer differ`);
  const mappings = parseMappings({ uids, gids });
  if (!mappings) throw new Error("the spec edits' userns mappings are not lists of {containerId, hostId, length}");
  const problem = mappingsProblem(mappings);
  if (problem) throw new Error(`the spec edits' userns: ${problem}`);
  if (typeof join !== "boolean") throw new Error("the spec edits' userns.join is not true or false");
  if (!Array.isArray(idmapMounts) || idmapMounts.length > MOUNTS_MAX) throw new Error(`the spec edits' userns.idmapMounts is not a list of at most ${MOUNTS_MAX} paths`);
  for (const path of idmapMounts) {
    if (typeof path !== "string" || !path.startsWith("/") || path.length > PATH_MAX || path.includes("\0")) {
      throw new Error(`the spec edits' userns.idmapMounts entry ${JSON.stringify(String(path).slice(0, 80))} is not an absolute path`);
    }
  }
  return { ...mappings, join, idmapMounts: idmapMounts as string[] };
}

function parseMountOptions(value: unknown): MountOptionsEdit[] {
  if (!Array.isArray(value) || value.length > MOUNTS_MAX) throw new Error(`the spec edits' mountOptions is not a list of at most ${MOUNTS_MAX} mounts`);
  const seen = new Set<string>();
  return value.map((entry: unknown) => {
    if (!entry || typeof entry !== "object" || Array.isArray(entry)) throw new Error("the spec edits' mountOptions entry is not an object");
    const { destination, options, ...rest } = entry as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new Error(`the spec edits' mountOptions entry carries ${unknown.join(", ")}, which this layer does not know: cridock and its layer differ`);
    if (typeof destination !== "string" || !destination.startsWith("/") || destination.length > PATH_MAX || destination.includes("\0") || destination.split("/").includes("..")) {
      throw new Error(`the spec edits' mountOptions destination ${JSON.stringify(String(destination).slice(0, 80))} is not an absolute path without ".." segments`);
    }
    if (seen.has(mountKey(destination))) throw new Error(`the spec edits' mountOptions name ${destination.slice(0, 80)} twice`);
    seen.add(mountKey(destination));
    if (!Array.isArray(options) || options.length === 0) throw new Error(`the spec edits' mountOptions for ${destination.slice(0, 80)} is not a non-empty list`);
    const problem = mountOptionsProblem(options);
    if (problem) throw new Error(`the spec edits' mountOptions for ${destination.slice(0, 80)}: ${problem}`);
    return { destination, options: options as BindMountOption[] };
  });
}

/** The edits in `text`, or an Error saying what is wrong with them. */
export function parseSpecEdits(text: string): SpecEdits {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`the spec edits are not JSON: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the spec edits are not a JSON object");
  const { version, unified, userns, mountOptions, ...rest } = parsed as Record<string, unknown>;
  if (version !== SPEC_EDITS_VERSION) throw new Error(`the spec edits' version ${JSON.stringify(version)} is not ${SPEC_EDITS_VERSION}: cridock and its layer differ`);
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`the spec edits carry ${unknown.join(", ")}, which this layer does not know: cridock and its layer differ`);
  const edits: SpecEdits = { version: SPEC_EDITS_VERSION };
  if (unified !== undefined) {
    if (!unified || typeof unified !== "object" || Array.isArray(unified)) throw new Error("the spec edits' unified is not an object");
    edits.unified = {};
    for (const [key, value] of Object.entries(unified)) {
      if (!isUnifiedKey(key)) throw new Error(`the spec edits' unified key ${JSON.stringify(key.slice(0, 80))} is not a cgroup v2 interface file name`);
      if (typeof value !== "string" || value.length === 0 || value.length > UNIFIED_VALUE_MAX || /[\0\n]/.test(value)) {
        throw new Error(`the spec edits' unified ${key} is not one line of at most ${UNIFIED_VALUE_MAX} characters`);
      }
      edits.unified[key] = value;
    }
  }
  if (userns !== undefined) edits.userns = parseUserns(userns);
  if (mountOptions !== undefined) edits.mountOptions = parseMountOptions(mountOptions);
  return edits;
}

/** The parts of an OCI runtime spec the edits touch; every other field is kept as it is. */
export interface OciSpec {
  root?: { path?: string } & Record<string, unknown>;
  mounts?: OciMount[];
  linux?: {
    resources?: { unified?: Record<string, string> } & Record<string, unknown>;
    namespaces?: { type: string; path?: string }[];
    uidMappings?: unknown;
    gidMappings?: unknown;
    sysctl?: Record<string, string>;
  } & Record<string, unknown>;
  [field: string]: unknown;
}

export interface OciMount {
  destination: string;
  source?: string;
  type?: string;
  options?: string[];
  [field: string]: unknown;
}

/** What idmapped-rootfs.ts made ready on the host for a container in a pod's user namespace. */
export interface PreparedUserns {
  /** The idmapped overlay to run the container in. */
  rootPath: string;
  /** Index in the spec's mounts → the idmapped bind of its source. */
  mountSources: ReadonlyMap<number, string>;
  /** /proc/<sandbox pid>/ns/user for a container that joins its pod's namespace. */
  joinPath?: string;
}

/** Docker's default for a container with its own network namespace: every group may ping. */
const DOCKER_PING_GROUP_RANGE = "0 2147483647";

/** The spec's bind mounts whose destination is one of `paths` (their indexes), for the layer to idmap. */
export function bindMountsAt(spec: OciSpec, paths: readonly string[]): number[] {
  const wanted = new Set(paths.map((p) => p.replace(/\/+$/, "") || "/"));
  const out: number[] = [];
  (spec.mounts ?? []).forEach((m, i) => {
    const bind = m.type === "bind" || (m.options ?? []).some((o) => o === "bind" || o === "rbind");
    if (bind && wanted.has(m.destination.replace(/\/+$/, "") || "/")) out.push(i);
  });
  return out;
}

/**
 * A mount's destination as Docker writes it into the spec, for matching:
 * Docker cleans the target it is given (path.Clean), kubelet's paths are
 * already clean; repeated and trailing slashes and "." segments go.
 */
function mountKey(path: string): string {
  return posix.normalize(path).replace(/\/+$/, "") || "/";
}

function isBind(m: OciMount): boolean {
  return m.type === "bind" || (m.options ?? []).some((o) => o === "bind" || o === "rbind");
}

/**
 * `spec` with each edit's options added to the bind mount at its
 * destination, beside the mount's own: `ro`, the propagation Docker wrote,
 * `rbind`; an idmapped volume (applyUserns) keeps them too, since that
 * edit swaps only the mount's source. An option that undoes one asked for
 * (`exec` for `noexec`) is taken out, since runc applies them in order.
 * A destination with no bind mount in the spec fails the container's
 * start: it never runs with the volume mounted without what was asked.
 */
export function applyMountOptions(spec: OciSpec, edits: readonly MountOptionsEdit[]): OciSpec {
  for (const edit of edits) {
    const key = mountKey(edit.destination);
    const matches = (spec.mounts ?? []).filter((m) => typeof m.destination === "string" && mountKey(m.destination) === key);
    if (matches.length === 0) throw new Error(`the bundle's config.json has no mount at ${edit.destination}, to which the options ${edit.options.join(",")} were to be added`);
    for (const mount of matches) {
      if (!isBind(mount)) throw new Error(`the bundle's config.json mounts ${edit.destination} as ${mount.type ?? "an untyped mount"}, not a bind mount, so the bind mount options ${edit.options.join(",")} cannot be added`);
      if (mount.options !== undefined && !Array.isArray(mount.options)) throw new Error(`the bundle's config.json has options of mount ${edit.destination} that are not a list`);
      const undone = new Set<string>(edit.options.map((o) => CONTRARY_OPTION[o]));
      const kept = (mount.options ?? []).filter((o) => !undone.has(o) && !(edit.options as string[]).includes(o));
      mount.options = [...kept, ...edit.options];
    }
  }
  return spec;
}

/**
 * `spec` in the pod's user namespace: a new one with the mappings for the
 * sandbox, or the sandbox's own (joinPath) for its containers; the rootfs
 * and volumes swapped for their idmapped binds. Docker's default
 * ping_group_range names groups the namespace does not map (runc's write
 * would fail), so it is narrowed to the mapped ones.
 */
export function applyUserns(spec: OciSpec, edit: UsernsEdit, prepared: PreparedUserns): OciSpec {
  const linux = (spec.linux ??= {});
  const namespaces = (linux.namespaces ?? []).filter((ns) => ns.type !== "user");
  namespaces.push(prepared.joinPath ? { type: "user", path: prepared.joinPath } : { type: "user" });
  linux.namespaces = namespaces;
  linux.uidMappings = ociMappings(edit.uids);
  linux.gidMappings = ociMappings(edit.gids);
  if (linux.sysctl?.["net.ipv4.ping_group_range"] === DOCKER_PING_GROUP_RANGE) {
    linux.sysctl["net.ipv4.ping_group_range"] = `0 ${highestMappedId(edit.gids)}`;
  }
  spec.root = { ...spec.root, path: prepared.rootPath };
  for (const [index, source] of prepared.mountSources) {
    const mount = spec.mounts?.[index];
    if (!mount) throw new Error(`the bundle's config.json has no mount ${index}`);
    mount.source = source;
  }
  return spec;
}

/** `spec` (a parsed config.json) with the edits applied. */
export function applySpecEdits(spec: unknown, edits: SpecEdits): OciSpec {
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) throw new Error("the bundle's config.json is not a JSON object");
  const out = spec as OciSpec;
  if (edits.unified && Object.keys(edits.unified).length > 0) {
    if (out.linux !== undefined && (typeof out.linux !== "object" || out.linux === null)) throw new Error("the bundle's config.json has a linux field that is not an object");
    const linux = (out.linux ??= {});
    const resources = (linux.resources ??= {});
    // The edits win over the same key in the spec, as kubelet's map wins over the other fields in runc.
    resources.unified = { ...resources.unified, ...edits.unified };
  }
  if (edits.mountOptions && edits.mountOptions.length > 0) applyMountOptions(out, edits.mountOptions);
  return out;
}
