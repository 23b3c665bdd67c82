/**
 * Docker container names, compatible with cri-dockerd (and dockershim before
 * it) so a node can switch runtimes without recreating its pods:
 *   sandbox    k8s_POD_<pod>_<namespace>_<uid>_<attempt>
 *   container  k8s_<container>_<pod>_<namespace>_<uid>_<attempt>
 * The name is the reservation of a pod attempt (and of a container attempt
 * in its pod): cridock never creates cri-dockerd's random-suffixed fallback
 * (`_<8 hex>`, a workaround for dockerd keeping names of removed containers,
 * fixed long before Engine API 1.41), because a second container for the
 * same attempt is exactly the duplicate CRI forbids. Parsers still accept
 * the suffixed form, for containers cri-dockerd made.
 */

export const NAME_PREFIX = "k8s";
export const SANDBOX_CONTAINER_NAME = "POD";
const DELIMITER = "_";

export interface PodIdentity {
  name: string;
  namespace: string;
  uid: string;
}

export interface ParsedName {
  /** "POD" for sandboxes. */
  containerName: string;
  pod: PodIdentity;
  attempt: number;
  isSandbox: boolean;
}

export function sandboxName(pod: PodIdentity, attempt: number): string {
  return [NAME_PREFIX, SANDBOX_CONTAINER_NAME, pod.name, pod.namespace, pod.uid, String(attempt)].join(DELIMITER);
}

export function containerName(container: { name: string; attempt: number }, pod: PodIdentity): string {
  return [NAME_PREFIX, container.name, pod.name, pod.namespace, pod.uid, String(container.attempt)].join(DELIMITER);
}

/** Parses a Docker container name (with or without its leading "/"); undefined if not ours. */
export function parseName(dockerName: string): ParsedName | undefined {
  const parts = dockerName.replace(/^\//, "").split(DELIMITER);
  if (parts[0] !== NAME_PREFIX || (parts.length !== 6 && parts.length !== 7)) return undefined;
  const attempt = Number(parts[5]);
  if (!Number.isSafeInteger(attempt) || attempt < 0) return undefined;
  return {
    containerName: parts[1]!,
    pod: { name: parts[2]!, namespace: parts[3]!, uid: parts[4]! },
    attempt,
    isSandbox: parts[1] === SANDBOX_CONTAINER_NAME,
  };
}

/**
 * Name parts become `_`-separated segments of a Docker name, so they may not
 * contain `_` themselves, and must be valid in Docker names ([a-zA-Z0-9_.-]).
 * Returns a reason when the part is unusable.
 */
export function invalidNamePart(value: string): string | undefined {
  if (value.length === 0) return "must not be empty";
  if (value.length > 253) return "must be at most 253 characters";
  if (!/^[a-zA-Z0-9][a-zA-Z0-9.-]*$/.test(value)) {
    return "may only contain letters, digits, '.' and '-', and must start with a letter or digit";
  }
  return undefined;
}
