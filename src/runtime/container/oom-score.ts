/**
 * Restricted oom_score_adj: whether containers may get a score lower than
 * the runtime's own, and the clamp when they may not.
 *
 * kubelet asks for -997 for Guaranteed and node-critical pods. runc writes
 * the score into /proc/self/oom_score_adj of the container's first process,
 * which inherited its score (and the lowest score it may return to) from
 * the daemons above it. Going lower needs CAP_SYS_RESOURCE in the initial
 * user namespace: on a host whose bounding set lacks it (a restricted
 * container running the node), or inside a user namespace (rootless), every
 * such container fails to start with "runc init: failed to update
 * /proc/self/oom_score_adj: Permission denied". containerd answers that with
 * its `restrict_oom_score_adj` setting, which raises every score below its
 * own to its own; cridock does the same, decided once at start from its own
 * capability bounding set and user namespace (nothing is written, so its own
 * score never changes), or forced either way by --restrict-oom-score-adj.
 *
 * The floor is cridock's own score: it stands for dockerd's, whose process
 * cridock cannot see through the Engine API (a node runs both at the same
 * score unless their units set different ones).
 */
import { readFile } from "node:fs/promises";
import { boundingSetMask } from "./capabilities.ts";
import { describeCause } from "../../errors.ts";
import type { Logger } from "../../log.ts";

/** --restrict-oom-score-adj: decide from the host, or force it. */
export type OomScoreRestriction = "auto" | boolean;

/** Bit of CAP_SYS_RESOURCE (linux/capability.h). */
const CAP_SYS_RESOURCE = 24n;
/** /proc/self/uid_map of a process in the initial user namespace. */
const INITIAL_UID_MAP = /^\s*0\s+0\s+4294967295\s*$/;

export interface OomScoreFacts {
  /** cridock's own oom_score_adj (-1000..1000). */
  ownScore: number;
  /** Whether CAP_SYS_RESOURCE is in cridock's bounding set (so in that of whatever the host starts the same way). */
  sysResourceInBoundingSet: boolean;
  /** Whether cridock runs in a user namespace other than the initial one, where no capability lowers a score. */
  inUserNamespace: boolean;
}

export interface OomScorePolicy {
  /** Whether scores below `floor` are raised to it. */
  restricted: boolean;
  /** The lowest score a container or sandbox gets while restricted. */
  floor: number;
  /** Whether this host cannot lower scores (what `auto` follows), whatever the setting. */
  hostRestricted: boolean;
  /** Why, in words, for the start-up log and `cridock check`. */
  reason: string;
}

/** Facts from this process's /proc files; only reads. */
export async function readOomScoreFacts(proc = "/proc/self"): Promise<OomScoreFacts> {
  const [status, score, uidMap] = await Promise.all([
    readFile(`${proc}/status`, "utf8"),
    readFile(`${proc}/oom_score_adj`, "utf8"),
    // Kernels without user namespaces have no uid_map: then there is only the initial one.
    readFile(`${proc}/uid_map`, "utf8").catch(() => "0 0 4294967295"),
  ]);
  return parseOomScoreFacts(status, score, uidMap);
}

/** The facts from the text of /proc/<pid>/status, oom_score_adj and uid_map. */
export function parseOomScoreFacts(status: string, score: string, uidMap: string): OomScoreFacts {
  const ownScore = Number(score.trim());
  if (!/^-?\d+$/.test(score.trim()) || ownScore < -1000 || ownScore > 1000) {
    throw new Error(`oom_score_adj "${score.trim()}" is not an integer in -1000..1000`);
  }
  const lines = uidMap.split("\n").filter((l) => l.trim() !== "");
  return {
    ownScore,
    sysResourceInBoundingSet: (boundingSetMask(status) & (1n << CAP_SYS_RESOURCE)) !== 0n,
    inUserNamespace: !(lines.length === 1 && INITIAL_UID_MAP.test(lines[0]!)),
  };
}

/** The policy for a --restrict-oom-score-adj setting on a host with these facts. */
export function decideOomScorePolicy(setting: OomScoreRestriction, facts: OomScoreFacts): OomScorePolicy {
  const floor = facts.ownScore;
  const hostReason = !facts.sysResourceInBoundingSet
    ? "the capability bounding set lacks CAP_SYS_RESOURCE"
    : facts.inUserNamespace
      ? "cridock runs in a user namespace"
      : undefined;
  const hostRestricted = hostReason !== undefined;
  if (setting === true) return { restricted: true, floor, hostRestricted, reason: "--restrict-oom-score-adj=true" };
  if (setting === false) {
    return {
      restricted: false,
      floor,
      hostRestricted,
      reason: hostReason
        ? `--restrict-oom-score-adj=false although ${hostReason}: containers asking for a score below ${floor} will fail to start`
        : "--restrict-oom-score-adj=false",
    };
  }
  if (hostReason) return { restricted: true, floor, hostRestricted, reason: `${hostReason}, so no process can lower its oom_score_adj` };
  return { restricted: false, floor, hostRestricted, reason: "scores can be lowered (CAP_SYS_RESOURCE in the bounding set, initial user namespace)" };
}

/** The score a container gets for `requested` under the policy. */
export function clampOomScore(requested: number, policy: OomScorePolicy | undefined): number {
  if (!policy?.restricted) return requested;
  return Math.max(requested, policy.floor);
}

/**
 * The start's policy, logged once: a clamped Guaranteed or node-critical
 * pod is no better protected from the OOM killer than cridock itself, so
 * the operator is told when scores are clamped, and why.
 */
export async function loadOomScorePolicy(setting: OomScoreRestriction, log: Logger): Promise<OomScorePolicy> {
  let policy: OomScorePolicy;
  try {
    policy = decideOomScorePolicy(setting, await readOomScoreFacts());
  } catch (err) {
    // Without /proc nothing can be decided: honour a forced setting, else pass scores on as asked.
    const restricted = setting === true;
    policy = { restricted, floor: 0, hostRestricted: false, reason: `cannot read this process's /proc files: ${describeCause(err)}` };
  }
  if (policy.restricted) {
    log.warn(
      { floor: policy.floor, reason: policy.reason },
      `oom_score_adj is restricted: containers and sandboxes asking for less than ${policy.floor} get ${policy.floor} (${policy.reason})`,
    );
  } else if (policy.hostRestricted) {
    log.warn({ reason: policy.reason }, "oom_score_adj restriction forced off on a host that cannot lower scores");
  } else {
    log.debug({ reason: policy.reason }, "oom_score_adj is passed on as asked");
  }
  return policy;
}
