/**
 * SupplementalGroupsPolicy Strict on Docker: the container's groups are its
 * primary gid, the pod's supplemental groups (fsGroup included, kubelet puts
 * it there) and nothing from the image's /etc/group.
 *
 * Docker adds the /etc/group memberships of the user only when Config.User
 * names no group (its user lookup fills the supplementary groups in that
 * case alone). So under Strict the user is always given as `user:group`: the
 * group that was asked for (run_as_group, or the group part of the image's
 * USER), else the user's primary gid from the image's /etc/passwd, as the
 * kernel would get it under Merge. A numeric uid the image does not list
 * gets gid 0 (what Docker and containerd do for such a uid).
 */
import { failedPrecondition } from "../errors.ts";

/** The security context fields that name the user (container's or sandbox's). */
export interface UserFields {
  runAsUser?: bigint | string;
  runAsGroup?: bigint | string;
  runAsUsername?: string;
}

export interface PasswdEntry {
  name: string;
  uid: bigint;
  gid: bigint;
}

const NUMERIC = /^[0-9]{1,10}$/;

/** /etc/passwd lines `name:password:uid:gid:gecos:home:shell`; malformed lines are skipped. */
export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split("\n")) {
    const fields = line.trim().split(":");
    if (fields.length < 4 || line.startsWith("#")) continue;
    const [name, , uid, gid] = fields as [string, string, string, string];
    if (!name || !NUMERIC.test(uid) || !NUMERIC.test(gid)) continue;
    out.push({ name, uid: BigInt(uid), gid: BigInt(gid) });
  }
  return out;
}

/** Who the container runs as before groups are decided: a uid or name, and a group when one is named. */
export interface RequestedUser {
  /** A uid ("1000") or a user name; "0" when neither the request nor the image names one. */
  user: string;
  /** A gid or group name; undefined when nothing names one. */
  group?: string;
}

/** The user the request asks for, else the image's USER (Docker's own default), else root. */
export function requestedUser(sc: UserFields, imageUser: string | undefined): RequestedUser {
  const group = sc.runAsGroup !== undefined ? String(sc.runAsGroup) : undefined;
  if (sc.runAsUser !== undefined) return { user: String(sc.runAsUser), group };
  if (sc.runAsUsername) return { user: sc.runAsUsername, group };
  const [user = "", imageGroup = ""] = (imageUser ?? "").trim().split(":", 2);
  return { user: user || "0", group: group ?? (imageGroup || undefined) };
}

/** Whether the image's /etc/passwd is needed to give the user a group. */
export function needsPasswd(requested: RequestedUser): boolean {
  return requested.group === undefined;
}

/**
 * Docker's Config.User for Strict: always `user:group`. `passwd` is the
 * image's /etc/passwd (undefined when the image has none); it is consulted
 * only when no group was named.
 */
export function strictUserString(requested: RequestedUser, passwd: PasswdEntry[] | undefined, image: string): string {
  if (requested.group !== undefined) return `${requested.user}:${requested.group}`;
  const numeric = NUMERIC.test(requested.user);
  const entry = numeric
    ? passwd?.find((e) => e.uid === BigInt(requested.user))
    : passwd?.find((e) => e.name === requested.user);
  if (entry) return `${requested.user}:${entry.gid}`;
  if (numeric) return `${requested.user}:0`;
  throw failedPrecondition(
    `user "${requested.user}" is not in /etc/passwd of image ${image}, so its primary group for supplemental_groups_policy Strict is unknown; give run_as_user and run_as_group as numbers`,
  );
}
