/**
 * The container lifecycle's side of bind mount options (CRI
 * Mount.mount_options; oci/mount-options.ts says which and why they need
 * cridock's OCI runtime layer):
 * - CreateContainer creates a container whose mounts ask for options with
 *   the layer's runtime, or refuses it with FAILED_PRECONDITION naming what
 *   the node lacks: never a container whose volumes would be mounted
 *   without them;
 * - StartContainer hands the options to the layer as spec edits, read from
 *   the mounts label CreateContainer left (the options travel with the
 *   mounts), and refuses a container that cannot get them.
 */
import type { ContainerCreateBody, ContainerInspect } from "../../docker/types.ts";
import { failedPrecondition } from "../../errors.ts";
import type { OciLayer } from "../../oci/layer.ts";
import { mountOptionsProblem, type BindMountOption, type MountOptionsSupport } from "../../oci/mount-options.ts";
import type { MountOptionsEdit } from "../../oci/spec-edits.ts";
import type { MountSpec } from "./spec.ts";

export type MountOptionsProbe = () => Promise<MountOptionsSupport>;

/**
 * The layer's edits for `mounts`: one per host-path mount that asks for
 * options. CreateContainer validated them; at start they come back from the
 * container's label, and a label that carries anything else (written by
 * some other hand) starts nothing rather than losing an option.
 */
export function mountOptionsEdits(mounts: readonly MountSpec[]): MountOptionsEdit[] {
  const edits: MountOptionsEdit[] = [];
  for (const m of mounts) {
    const options: unknown = m.mountOptions;
    if (options === undefined || (Array.isArray(options) && options.length === 0)) continue;
    const problem = Array.isArray(options) ? mountOptionsProblem(options) : "the mount options are not a list";
    if (problem || m.image || typeof m.containerPath !== "string") {
      throw failedPrecondition(`the container's mount ${String(m.containerPath).slice(0, 200)} carries bind mount options CreateContainer would not have accepted (${problem ?? "an image volume"}): create it again`);
    }
    edits.push({ destination: m.containerPath, options: options as BindMountOption[] });
  }
  return edits;
}

/** The layer that carries the options out; FAILED_PRECONDITION naming what the node lacks. */
export async function mountOptionsLayer(probe: MountOptionsProbe | undefined, what: string, edits: readonly MountOptionsEdit[]): Promise<OciLayer> {
  const answer: MountOptionsSupport = probe ? await probe() : { ok: false, reason: "this cridock was started without its OCI runtime layer" };
  if (answer.ok) return answer.layer;
  const asked = edits.map((e) => `${e.destination} (${e.options.join(",")})`).join(", ");
  throw failedPrecondition(`${what} asks for bind mount options on ${asked}, which this node cannot honour: ${answer.reason}`);
}

/**
 * `body` created with the layer's runtime, so that its start goes through
 * the layer. A runtime some other need picked already (a pod's user
 * namespace, `unified` keys) is the layer's too; any other runtime would
 * run the container without the options, so it is refused.
 */
export function createForMountOptions(body: ContainerCreateBody, layer: OciLayer, what: string): void {
  const runtime = body.HostConfig?.Runtime;
  if (runtime && runtime !== layer.runtime) {
    throw failedPrecondition(`${what} asks for bind mount options, which only cridock's OCI runtime layer carries out, and is to run under runtime "${runtime}"`);
  }
  body.HostConfig = { ...body.HostConfig, Runtime: layer.runtime };
}

/** At start: the container must have been created for the layer it now runs through. */
export function checkStartRuntime(c: Pick<ContainerInspect, "HostConfig">, layer: OciLayer, id: string): void {
  if (c.HostConfig.Runtime !== layer.runtime) {
    throw failedPrecondition(`container ${id} asks for bind mount options and was created without cridock's OCI runtime layer (runtime "${c.HostConfig.Runtime || "default"}"): create it again`);
  }
}
