/**
 * A pod's user namespace mappings (KEP-127), as kubelet sends them in
 * `userns_options` and as they travel on: into the OCI spec
 * (`linux.uidMappings`), into util-linux's `X-mount.idmap` option for the
 * idmapped layers and volumes, and as the kernel shows them back in
 * /proc/<pid>/uid_map. Pure functions; every value is checked, since a
 * mapping decides which host ids a pod's processes and files get.
 */

export interface IdMapping {
  /** First id inside the user namespace. */
  containerId: number;
  /** The host id it stands for. */
  hostId: number;
  length: number;
}

export interface UsernsMappings {
  uids: IdMapping[];
  gids: IdMapping[];
}

/** The kernel takes at most this many lines in a uid_map or gid_map (since 4.15). */
export const MAX_MAPPING_LINES = 340;
/** ids are 32-bit, and 2^32-1 is (uid_t)-1, "no id": a range ends at or below it. */
const ID_END = 2 ** 32 - 1;
/**
 * The host's own ids, which no pod may be given: root, the system's users
 * and groups, its people (login.defs' UID_MAX is 60000), nobody (65534).
 * kubelet never hands them out: its ranges start at 65536 or later (KEP-127,
 * a multiple of 65536). A pod's root on one of them would own, as the host
 * sees it, whatever that user owns, and would pass the layer's directory
 * of its rootfs (root:<pod root's gid> 0710) as that group.
 */
export const HOST_RESERVED_IDS = 65536;

function isId(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 && n < ID_END;
}

/** Why `list` cannot be one of a pod's mappings ("uid" or "gid" names which), or undefined when it can. */
export function mappingProblem(what: "uid" | "gid", list: readonly IdMapping[]): string | undefined {
  if (list.length === 0) return `no ${what} mapping is given`;
  if (list.length > MAX_MAPPING_LINES) return `${list.length} ${what} mappings are more than the kernel's ${MAX_MAPPING_LINES}`;
  for (const m of list) {
    const text = `${what} mapping ${m.containerId}:${m.hostId}:${m.length}`;
    if (!isId(m.containerId) || !isId(m.hostId) || !Number.isSafeInteger(m.length) || m.length < 1) {
      return `${text} is not container id, host id and a length of at least 1`;
    }
    if (m.containerId + m.length > ID_END || m.hostId + m.length > ID_END) return `${text} reaches past the last id (${ID_END - 1})`;
    // Root inside is what the namespace exists to keep from being root outside, or any of the host's users.
    if (m.hostId < HOST_RESERVED_IDS) return `${text} maps onto the host's own ${what}s (0-${HOST_RESERVED_IDS - 1}), which no pod may have: kubelet gives pods ranges from ${HOST_RESERVED_IDS} on`;
  }
  // A namespace without the pod's root would start its processes as an id
  // it has no name for; kubelet always maps 0 (KEP-127).
  if (!list.some((m) => m.containerId === 0)) return `no ${what} mapping starts at container ${what} 0, the pod's root`;
  const overlap = (key: "containerId" | "hostId") => {
    const sorted = [...list].sort((a, b) => a[key] - b[key]);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i - 1]![key] + sorted[i - 1]!.length > sorted[i]![key]) return true;
    }
    return false;
  };
  if (overlap("containerId")) return `the ${what} mappings' container ranges overlap`;
  if (overlap("hostId")) return `the ${what} mappings' host ranges overlap`;
  return undefined;
}

/** Both lists' problem, or undefined. */
export function mappingsProblem(m: UsernsMappings): string | undefined {
  return mappingProblem("uid", m.uids) ?? mappingProblem("gid", m.gids);
}

/** The first host range of `a` that overlaps one of `b`'s ("uid" or "gid" named), or undefined. */
export function overlappingMapping(a: UsernsMappings, b: UsernsMappings): { what: "uid" | "gid"; mine: IdMapping; theirs: IdMapping } | undefined {
  for (const what of ["uid", "gid"] as const) {
    const key = what === "uid" ? "uids" : "gids";
    for (const mine of a[key]) {
      const theirs = b[key].find((t) => mine.hostId < t.hostId + t.length && t.hostId < mine.hostId + mine.length);
      if (theirs) return { what, mine, theirs };
    }
  }
  return undefined;
}

export function sameMappings(a: UsernsMappings, b: UsernsMappings): boolean {
  const key = (list: readonly IdMapping[]) => list.map((m) => `${m.containerId}:${m.hostId}:${m.length}`).join(" ");
  return key(a.uids) === key(b.uids) && key(a.gids) === key(b.gids);
}

/** The OCI spec's form (runtime-spec config-linux.md, "User namespace mappings"). */
export function ociMappings(list: readonly IdMapping[]): { containerID: number; hostID: number; size: number }[] {
  return list.map((m) => ({ containerID: m.containerId, hostID: m.hostId, size: m.length }));
}

/**
 * util-linux's `X-mount.idmap` value (mount(8), 2.39 and newer): one
 * `u:` or `g:` entry per line, in uid_map order (id inside, host id,
 * length). A mount made with it shows a file the disk has as 0 as the
 * mapping's host id for 0, so the pod's root owns the image's root files.
 */
export function idmapMountOption(m: UsernsMappings): string {
  const entries = (type: "u" | "g", list: readonly IdMapping[]) => list.map((e) => `${type}:${e.containerId}:${e.hostId}:${e.length}`);
  return [...entries("u", m.uids), ...entries("g", m.gids)].join(" ");
}

/** Whether the text of /proc/<pid>/uid_map (or gid_map) holds exactly `list`, in any order. */
export function procMapMatches(text: string, list: readonly IdMapping[]): boolean {
  const lines = text
    .split("\n")
    .map((l) => l.trim().split(/\s+/).join(" "))
    .filter(Boolean)
    .sort();
  const want = list.map((m) => `${m.containerId} ${m.hostId} ${m.length}`).sort();
  return lines.length === want.length && lines.every((l, i) => l === want[i]);
}

/** The highest id the namespace maps, for a range such as ping_group_range that must stay inside it. */
export function highestMappedId(list: readonly IdMapping[]): number {
  return Math.max(...list.map((m) => m.containerId + m.length - 1));
}

/** The mappings in a label or an edits file, or undefined when `value` is not their shape. */
export function parseMappings(value: unknown): UsernsMappings | undefined {
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  const { uids, gids } = value as Record<string, unknown>;
  const list = (v: unknown): IdMapping[] | undefined => {
    if (!Array.isArray(v)) return undefined;
    const out: IdMapping[] = [];
    for (const e of v) {
      if (!e || typeof e !== "object") return undefined;
      const { containerId, hostId, length } = e as Record<string, unknown>;
      if (typeof containerId !== "number" || typeof hostId !== "number" || typeof length !== "number") return undefined;
      out.push({ containerId, hostId, length });
    }
    return out;
  };
  const u = list(uids);
  const g = list(gids);
  return u && g ? { uids: u, gids: g } : undefined;
}
