/**
 * Bind mount options (CRI Mount.mount_options, KEP-5855, kubelet's
 * `VolumeBindMountOptions` gate): the options kubelet lets a pod ask for a
 * volume, and whether this node can honour them.
 *
 * Docker's API has no field for them (its bind options are read-only,
 * propagation and recursion), so they reach the mount only through
 * cridock's OCI runtime layer, which adds them to the mount's `options` in
 * the container's config.json (spec-edits.ts applyMountOptions), where runc
 * applies them when it mounts the volume, before the container's first
 * instruction. Without the layer the node cannot honour them: Status says
 * so, and a request that asks anyway is refused, never run without them.
 */
import { LAYER_INSTALL_HINT, type LayerState, type OciLayer } from "./layer.ts";

/** What kubelet allows in `volumeMounts[].bindMountOptions` (k8s.io/api core/v1 BindMountOption). */
export const BIND_MOUNT_OPTIONS = ["noexec", "nodev", "nosuid"] as const;
export type BindMountOption = (typeof BIND_MOUNT_OPTIONS)[number];

/** The option each one undoes, were it in the spec already (runc applies a mount's options in order). */
export const CONTRARY_OPTION: Readonly<Record<BindMountOption, string>> = { noexec: "exec", nodev: "dev", nosuid: "suid" };

export function isBindMountOption(value: unknown): value is BindMountOption {
  return typeof value === "string" && (BIND_MOUNT_OPTIONS as readonly string[]).includes(value);
}

/** Why `options` is not a list kubelet could send (each of noexec, nodev, nosuid at most once), or undefined. */
export function mountOptionsProblem(options: readonly unknown[]): string | undefined {
  const seen = new Set<string>();
  for (const option of options) {
    const text = typeof option === "string" ? option : JSON.stringify(option);
    if (!isBindMountOption(option)) {
      return `mount option ${JSON.stringify(String(text).slice(0, 80))} is not one of ${BIND_MOUNT_OPTIONS.join(", ")}, the bind mount options kubelet allows`;
    }
    if (seen.has(option)) return `mount option "${option}" is given twice`;
    seen.add(option);
  }
  return undefined;
}

export type MountOptionsSupport = { ok: true; layer: OciLayer } | { ok: false; reason: string };

/** Whether a node whose layer is in `state` honours bind mount options, and if not, why. */
export function mountOptionsSupport(state: LayerState): MountOptionsSupport {
  if (state.ready) return { ok: true, layer: state.layer };
  const hint = state.reason.includes("oci-layer install") ? "" : `; ${LAYER_INSTALL_HINT}`;
  return { ok: false, reason: `bind mount options go into the OCI spec through cridock's OCI runtime layer, which this node lacks: ${state.reason}${hint}` };
}
