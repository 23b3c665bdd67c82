/**
 * The pod CIDR kubelet sent (UpdateRuntimeConfig), kept under the root
 * directory. kubelet sends it only when it changes, not again to a runtime
 * that restarted, so without it a restarted cridock would give the CNI
 * plugins no ipRanges and every pod network ADD that relies on them would
 * fail until the node's CIDR changed. containerd keeps it the same way, in
 * the CNI config it writes from its template.
 */
import { join } from "node:path";
import { StoredString } from "./checkpoint.ts";

/** The CIDR last saved, or undefined (never saved, or unreadable: kubelet's next one replaces it). */
export class PodCidrStore extends StoredString {
  constructor(rootDirectory: string) {
    super(join(rootDirectory, "network"), "pod-cidr", "podCidr");
  }
}
