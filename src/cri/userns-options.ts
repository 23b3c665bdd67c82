/**
 * `userns_options` of a pod sandbox or container (KEP-127) as the runtime
 * sees them: undefined for the host's user namespace (mode NODE, kubelet's
 * default), or the pod's mappings for mode POD. CONTAINER and TARGET have
 * no meaning for user namespaces in the CRI, and mappings without mode POD
 * would be silently dropped: both are refused. The mappings themselves are
 * checked where the sandbox is validated (oci/id-mappings.ts).
 */
import { invalidArgument } from "../errors.ts";
import type { UsernsMappings } from "../oci/id-mappings.ts";
import { NamespaceMode, type IDMapping, type UserNamespace } from "./proto-types.ts";

function mappings(list: IDMapping[] | undefined): UsernsMappings["uids"] {
  return (list ?? []).map((m) => ({ containerId: m.containerId ?? 0, hostId: m.hostId ?? 0, length: m.length ?? 0 }));
}

export function usernsFromCri(options: UserNamespace | null | undefined, what: string): UsernsMappings | undefined {
  const mode = options?.mode ?? NamespaceMode.NODE;
  const given = mountMappings(options?.uids, options?.gids);
  if (mode === NamespaceMode.NODE) {
    if (given) throw invalidArgument(`${what} user namespace mode NODE comes with uid/gid mappings; mappings need mode POD`);
    return undefined;
  }
  if (mode !== NamespaceMode.POD) {
    const name = Object.entries(NamespaceMode).find(([, v]) => v === mode)?.[0] ?? String(mode);
    throw invalidArgument(`${what} user namespace mode ${name} is not NODE or POD, the two the CRI defines for user namespaces`);
  }
  if (!given) throw invalidArgument(`${what} user namespace mode POD needs uid and gid mappings`);
  return given;
}

/** The uid/gid mappings of a mount (or of userns_options), or undefined when it has none (the usual case). */
export function mountMappings(uids: IDMapping[] | undefined, gids: IDMapping[] | undefined): UsernsMappings | undefined {
  return (uids?.length ?? 0) > 0 || (gids?.length ?? 0) > 0 ? { uids: mappings(uids), gids: mappings(gids) } : undefined;
}
