/**
 * The Engine API versions cridock speaks, and their comparison: the client
 * negotiates the lower of dockerd's and MAX_API_VERSION, and features that
 * depend on the version are decided with compareApiVersions.
 */

export const MIN_API_VERSION = "1.41";
/**
 * 1.48 (Docker 28.0) is the first with image mounts (Mount type "image");
 * its other changes are additions and deprecations cridock does not rely on.
 */
export const MAX_API_VERSION = "1.48";

/** Compares dotted API versions numerically: -1, 0 or 1. */
export function compareApiVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}
