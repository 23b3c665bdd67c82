/**
 * What cridock adds to a container's OCI spec through its runtime layer
 * (launcher.ts): the parts of kubelet's request that Docker's API has no
 * field for. Today that is the cgroup v2 `unified` map's keys that no
 * HostConfig field carries (container/unified.ts decides which), put in
 * `linux.resources.unified`, where runc writes them into the container's
 * cgroup before its first process runs.
 *
 * The edits file is read by a process Docker starts as root, so it is
 * treated as hostile: parseSpecEdits takes only the known shape, with every
 * key and value checked as CreateContainer checks them.
 */
import { isUnifiedKey, UNIFIED_VALUE_MAX } from "../runtime/unified-keys.ts";

export const SPEC_EDITS_VERSION = 1;

export interface SpecEdits {
  version: typeof SPEC_EDITS_VERSION;
  /** cgroup v2 interface file → value, merged over what the spec has. */
  unified?: Record<string, string>;
}

/** The edits in `text`, or an Error saying what is wrong with them. */
export function parseSpecEdits(text: string): SpecEdits {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`the spec edits are not JSON: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the spec edits are not a JSON object");
  const { version, unified, ...rest } = parsed as Record<string, unknown>;
  if (version !== SPEC_EDITS_VERSION) throw new Error(`the spec edits' version ${JSON.stringify(version)} is not ${SPEC_EDITS_VERSION}: cridock and its layer differ`);
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`the spec edits carry ${unknown.join(", ")}, which this layer does not know: cridock and its layer differ`);
  const edits: SpecEdits = { version: SPEC_EDITS_VERSION };
  if (unified !== undefined) {
    if (!unified || typeof unified !== "object" || Array.isArray(unified)) throw new Error("the spec edits' unified is not an object");
    edits.unified = {};
    for (const [key, value] of Object.entries(unified)) {
      if (!isUnifiedKey(key)) throw new Error(`the spec edits' unified key ${JSON.stringify(key.slice(0, 80))} is not a cgroup v2 interface file name`);
      if (typeof value !== "string" || value.length === 0 || value.length > UNIFIED_VALUE_MAX || /[\0\n]/.test(value)) {
        throw new Error(`the spec edits' unified ${key} is not one line of at most ${UNIFIED_VALUE_MAX} characters`);
      }
      edits.unified[key] = value;
    }
  }
  return edits;
}

/** The parts of an OCI runtime spec the edits touch; every other field is kept as it is. */
interface OciSpec {
  linux?: { resources?: { unified?: Record<string, string> } & Record<string, unknown> } & Record<string, unknown>;
  [field: string]: unknown;
}

/** `spec` (a parsed config.json) with the edits applied. */
export function applySpecEdits(spec: unknown, edits: SpecEdits): OciSpec {
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) throw new Error("the bundle's config.json is not a JSON object");
  const out = spec as OciSpec;
  if (edits.unified && Object.keys(edits.unified).length > 0) {
    if (out.linux !== undefined && (typeof out.linux !== "object" || out.linux === null)) throw new Error("the bundle's config.json has a linux field that is not an object");
    const linux = (out.linux ??= {});
    const resources = (linux.resources ??= {});
    // The edits win over the same key in the spec, as kubelet's map wins over the other fields in runc.
    resources.unified = { ...resources.unified, ...edits.unified };
  }
  return out;
}
