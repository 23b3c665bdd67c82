/**
 * Docker labels on the containers cridock creates. The keys shared with
 * cri-dockerd are kept as they are; labels cridock adds for itself live under
 * `io.cridock.`. Internal labels never appear in CRI responses: CRI labels are
 * copied as they are, CRI annotations are stored as `annotation.<key>`.
 */
import { invalidArgument } from "../errors.ts";

export const TYPE_LABEL = "io.kubernetes.docker.type";
export const TYPE_SANDBOX = "podsandbox";
export const TYPE_CONTAINER = "container";
export const SANDBOX_ID_LABEL = "io.kubernetes.sandbox.id";
export const LOG_PATH_LABEL = "io.kubernetes.container.logpath";
export const CONTAINER_NAME_LABEL = "io.kubernetes.container.name";
export const ANNOTATION_PREFIX = "annotation.";
export const CRIDOCK_PREFIX = "io.cridock.";
/** Internal label naming the cridock root directory that owns a sandbox or container (recovery and listing keep to their own). */
export const ROOT_LABEL = `${CRIDOCK_PREFIX}root`;

export type ContainerType = typeof TYPE_SANDBOX | typeof TYPE_CONTAINER;

const INTERNAL_KEYS = new Set([TYPE_LABEL, SANDBOX_ID_LABEL, LOG_PATH_LABEL]);

export function isInternalLabel(key: string): boolean {
  return INTERNAL_KEYS.has(key) || key.startsWith(CRIDOCK_PREFIX);
}

/**
 * Refuses, as INVALID_ARGUMENT naming the key, what a request must not set
 * because cridock reads it back as its own fact about the object:
 * - labels and annotations under `io.cridock.` (a sandbox labelled
 *   io.cridock.scratch was taken for a leftover scratch container and
 *   force-removed at the next start; io.cridock.userns carries user
 *   namespace mappings);
 * - labels named as cridock's shared keys with cri-dockerd
 *   (io.kubernetes.docker.type, io.kubernetes.sandbox.id,
 *   io.kubernetes.container.logpath): they say what a Docker container is,
 *   which sandbox a container belongs to and where its log goes. kubelet
 *   never sends them (they were dockershim's own); its io.kubernetes.pod.*
 *   and io.kubernetes.container.name labels are its own and stay accepted.
 *   An annotation of such a name is stored as `annotation.<key>` and
 *   cannot be taken for one.
 */
export function checkRequestLabels(what: string, labels: Record<string, string>, annotations: Record<string, string>): void {
  for (const key of Object.keys(labels)) {
    if (key.startsWith(CRIDOCK_PREFIX)) throw invalidArgument(`${what} label ${JSON.stringify(clipKey(key))} is in the ${CRIDOCK_PREFIX} namespace, which cridock keeps for its own labels`);
    if (INTERNAL_KEYS.has(key)) throw invalidArgument(`${what} label "${key}" is one cridock sets itself (as cri-dockerd does) and reads back; a request cannot set it`);
  }
  for (const key of Object.keys(annotations)) {
    if (key.startsWith(CRIDOCK_PREFIX)) throw invalidArgument(`${what} annotation ${JSON.stringify(clipKey(key))} is in the ${CRIDOCK_PREFIX} namespace, which cridock keeps for its own annotations`);
  }
}

function clipKey(key: string): string {
  return key.length > 120 ? `${key.slice(0, 120)}…` : key;
}

/** Docker labels for a CRI object: its labels, its annotations, and cridock's own. */
export function toDockerLabels(
  labels: Record<string, string> | undefined,
  annotations: Record<string, string> | undefined,
  internal: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = { ...(labels ?? {}) };
  for (const [key, value] of Object.entries(annotations ?? {})) out[ANNOTATION_PREFIX + key] = value;
  for (const [key, value] of Object.entries(internal)) {
    if (!isInternalLabel(key) && key !== CONTAINER_NAME_LABEL) {
      throw new Error(`label ${key} is not an internal label key`);
    }
    out[key] = value;
  }
  return out;
}

export interface SplitLabels {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  internal: Record<string, string>;
}

/**
 * Splits Docker labels back into CRI labels, annotations and internal labels.
 * For sandboxes the `io.kubernetes.container.name=POD` label cridock adds (as
 * cri-dockerd does) is internal too.
 */
export function fromDockerLabels(docker: Record<string, string> | null | undefined, isSandbox: boolean): SplitLabels {
  const result: SplitLabels = { labels: {}, annotations: {}, internal: {} };
  for (const [key, value] of Object.entries(docker ?? {})) {
    if (isInternalLabel(key) || (isSandbox && key === CONTAINER_NAME_LABEL && value === "POD")) {
      result.internal[key] = value;
    } else if (key.startsWith(ANNOTATION_PREFIX)) {
      result.annotations[key.slice(ANNOTATION_PREFIX.length)] = value;
    } else {
      result.labels[key] = value;
    }
  }
  return result;
}

/** CRI label selectors are AND-ed exact matches. */
export function matchesSelector(labels: Record<string, string>, selector: Record<string, string> | undefined): boolean {
  for (const [key, value] of Object.entries(selector ?? {})) {
    if (labels[key] !== value) return false;
  }
  return true;
}
