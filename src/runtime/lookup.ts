/**
 * Resolves CRI ids (Docker container ids, or unique prefixes of them, as
 * crictl allows) to the Docker containers of one cridock type, and tells
 * whether a container is gone after a removal raced with another one.
 */
import type { DockerClient } from "../docker/client.ts";
import { isNotFound } from "../docker/errors.ts";
import type { ContainerSummary } from "../docker/types.ts";
import { invalidArgument } from "../errors.ts";
import { TYPE_LABEL, type ContainerType } from "./labels.ts";

const ID_PATTERN = /^[0-9a-f]{1,64}$/;

/** Throws INVALID_ARGUMENT unless `id` can be a (prefix of a) Docker id. */
export function validateId(id: string | undefined, what: string): string {
  if (!id) throw invalidArgument(`${what} id is required`);
  if (!ID_PATTERN.test(id)) throw invalidArgument(`${what} id "${truncate(id)}" is not a hexadecimal container id`);
  return id;
}

/**
 * The containers of `type` whose id starts with `prefix`. Docker's `id`
 * filter is an unanchored regular expression, so the result is re-filtered.
 */
export async function listByIdPrefix(docker: DockerClient, type: ContainerType, prefix: string): Promise<ContainerSummary[]> {
  const found = await docker.listContainers({ label: [`${TYPE_LABEL}=${type}`], id: [prefix] });
  return found.filter((c) => c.Id.startsWith(prefix));
}

/** The one container of `type` whose id is or starts with `id`; undefined if none; INVALID_ARGUMENT if ambiguous. */
export async function findByIdOrPrefix(
  docker: DockerClient,
  type: ContainerType,
  id: string,
  what: string,
): Promise<ContainerSummary | undefined> {
  const matches = await listByIdPrefix(docker, type, validateId(id, what));
  if (matches.length > 1) {
    const exact = matches.find((c) => c.Id === id);
    if (exact) return exact;
    throw invalidArgument(`${what} id prefix "${id}" is ambiguous: it matches ${matches.length} ${what}s`);
  }
  return matches[0];
}

function truncate(text: string): string {
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * After a failed removal: whether the container is gone anyway, because a
 * removal already in progress elsewhere finished (waits up to 2 s).
 */
export async function removedMeanwhile(docker: DockerClient, id: string): Promise<boolean> {
  for (let i = 0; i < 20; i++) {
    try {
      await docker.inspectContainer(id);
    } catch (err) {
      if (isNotFound(err)) return true;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
