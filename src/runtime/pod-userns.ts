/**
 * A pod in its own user namespace (KEP-127, `hostUsers: false`) on Docker,
 * whose API has no field for one: its sandbox and containers are created
 * with cridock's OCI runtime layer, which puts the namespace, the mappings
 * and the idmapped rootfs and volumes into each spec on the runtime's
 * `create` (src/oci/). The mappings travel on the containers' labels, for
 * StartContainer to hand them to the layer.
 *
 * Fail closed: each container also carries an OCI annotation that the
 * layer's launcher checks, so a container of such a pod that something
 * else starts (`docker start`, or any start without cridock's edits) is
 * refused by the layer instead of running in the host's user namespace.
 */
import type { ContainerCreateBody } from "../docker/types.ts";
import { CridockError, failedPrecondition, invalidArgument, unimplemented } from "../errors.ts";
import { overlappingMapping, parseMappings, sameMappings, type UsernsMappings } from "../oci/id-mappings.ts";
import type { OciLayer } from "../oci/layer.ts";
import { USERNS_ANNOTATION, USERNS_ANNOTATION_VALUE } from "../oci/launcher.ts";
import type { UsernsEdit } from "../oci/spec-edits.ts";
import type { UsernsSupport } from "../oci/userns-support.ts";
import { CRIDOCK_PREFIX } from "./labels.ts";
import type { SandboxView } from "./sandbox/view.ts";
import type { MountSpec } from "./container/spec.ts";

export const USERNS_LABEL = `${CRIDOCK_PREFIX}userns`;

export function usernsFromLabels(labels: Record<string, string> | null | undefined): UsernsMappings | undefined {
  const text = labels?.[USERNS_LABEL];
  if (!text) return undefined;
  try {
    return parseMappings(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** The layer to run a pod's user namespace through; FAILED_PRECONDITION naming what the node lacks. */
export async function usernsLayer(support: (() => Promise<UsernsSupport>) | undefined, what: string): Promise<OciLayer> {
  const answer = support ? await support() : { ok: false as const, reason: "this cridock was started without its OCI runtime layer" };
  if (!answer.ok) throw failedPrecondition(`${what} asks for its own user namespace, which this node cannot give: ${answer.reason}`);
  return answer.layer;
}

/** `body` created for the layer, marked as belonging in the pod's user namespace. */
export function createInUserns(body: ContainerCreateBody, mappings: UsernsMappings, layer: OciLayer): void {
  body.HostConfig = { ...body.HostConfig, Runtime: layer.runtime, Annotations: { ...body.HostConfig?.Annotations, [USERNS_ANNOTATION]: USERNS_ANNOTATION_VALUE } };
  body.Labels = { ...body.Labels, [USERNS_LABEL]: JSON.stringify({ uids: mappings.uids, gids: mappings.gids }) };
}

/** A pod sandbox that holds host ids: recorded, or being created (sandboxId ""). */
export interface UsernsHolder {
  sandboxId: string;
  /** namespace/name */
  pod: string;
  podUid: string;
  mappings: UsernsMappings;
}

/**
 * INVALID_ARGUMENT naming the other pod when `asked` overlaps the host ids
 * of a holder of another pod (by uid: the attempts of one pod share their
 * ids, as kubelet gives them), or undefined. Two pods on the same host ids
 * would own each other's files and could signal each other's processes:
 * the isolation the namespaces exist for. kubelet never gives out one id
 * twice; this holds when another client, or a second kubelet, does.
 */
export function usernsClash(asked: UsernsMappings, podUid: string, holders: Iterable<UsernsHolder>): CridockError | undefined {
  for (const h of holders) {
    if (h.podUid === podUid) continue;
    const overlap = overlappingMapping(asked, h.mappings);
    if (!overlap) continue;
    const range = (m: { hostId: number; length: number }) => `${m.hostId}-${m.hostId + m.length - 1}`;
    const where = h.sandboxId ? `sandbox ${h.sandboxId.slice(0, 12)}` : "being created";
    return new CridockError(
      "INVALID_ARGUMENT",
      `pod sandbox user namespace: host ${overlap.what}s ${range(overlap.mine)} overlap host ${overlap.what}s ${range(overlap.theirs)} of pod ${h.pod} (${where}); every pod needs host ids of its own`,
    );
  }
  return undefined;
}

/** The layer's edit for a container of the pod: the sandbox makes the namespace, the others join it. */
export function usernsEdit(mappings: UsernsMappings, sandbox: boolean, idmapMounts: readonly string[]): UsernsEdit {
  return { uids: mappings.uids, gids: mappings.gids, join: !sandbox, idmapMounts: [...idmapMounts] };
}

/**
 * The user namespace a container of `view`'s pod runs in: the pod's, which
 * the container must ask for with the same mappings (kubelet sends them so),
 * or the host's for both. A container cannot leave its pod's namespace,
 * nor have one of its own.
 */
export function checkPodUserns(asked: UsernsMappings | undefined, view: SandboxView, name: string, mounts: readonly MountSpec[] = []): UsernsMappings | undefined {
  checkMountMappings(mounts, view.userns, name);
  if (!view.userns) {
    if (asked) throw invalidArgument(`container ${name} asks for a user namespace, and its pod sandbox ${view.id.slice(0, 12)} runs in the host's`);
    return undefined;
  }
  if (!asked) throw invalidArgument(`container ${name} asks for the host's user namespace, and its pod sandbox ${view.id.slice(0, 12)} has its own: give the pod's mappings with mode POD`);
  if (!sameMappings(asked, view.userns)) throw invalidArgument(`container ${name}'s user namespace mappings differ from those of its pod sandbox ${view.id.slice(0, 12)}`);
  return view.userns;
}

/**
 * A mount with uid/gid mappings is idmapped by the layer with the pod's
 * mappings (kubelet gives each volume its pod's), so it needs a pod with
 * its own namespace and those very mappings; any other is refused.
 */
function checkMountMappings(mounts: readonly MountSpec[], podUserns: UsernsMappings | undefined, name: string): void {
  for (const m of mounts) {
    if (!m.idMappings) continue;
    if (!podUserns) throw unimplemented(`container ${name}: mount ${m.containerPath} has uid/gid mappings, which cridock carries out only in a pod with its own user namespace`);
    if (m.image) throw unimplemented(`container ${name}: image volume ${m.containerPath} has uid/gid mappings, which Docker's image mounts cannot take`);
    if (!sameMappings(m.idMappings, podUserns)) {
      throw invalidArgument(`container ${name}: mount ${m.containerPath}'s uid/gid mappings ${JSON.stringify(m.idMappings)} are not its pod's ${JSON.stringify(podUserns)}`);
    }
  }
}

/** Container paths of the mounts the layer idmaps: those with mappings (checkMountMappings made sure they are the pod's). */
export function idmappedMounts(mounts: readonly MountSpec[]): string[] {
  return mounts.filter((m) => m.idMappings && !m.image).map((m) => m.containerPath);
}
