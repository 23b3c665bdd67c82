/**
 * The pod CIDR kubelet sent (UpdateRuntimeConfig), kept under the root
 * directory. kubelet sends it only when it changes, not again to a runtime
 * that restarted, so without it a restarted cridock would give the CNI
 * plugins no ipRanges and every pod network ADD that relies on them would
 * fail until the node's CIDR changed. containerd keeps it the same way, in
 * the CNI config it writes from its template.
 */
import { join } from "node:path";
import { CheckpointStore } from "./checkpoint.ts";

interface Stored {
  podCidr: string;
}

const KEY = "pod-cidr";

export class PodCidrStore {
  private readonly store: CheckpointStore<Stored>;

  constructor(rootDirectory: string) {
    this.store = new CheckpointStore<Stored>(join(rootDirectory, "network"));
  }

  /** The CIDR last saved, or undefined (never saved, or unreadable: kubelet's next one replaces it). */
  async load(): Promise<string | undefined> {
    try {
      const stored = await this.store.read(KEY);
      return typeof stored?.podCidr === "string" && stored.podCidr ? stored.podCidr : undefined;
    } catch {
      return undefined;
    }
  }

  async save(podCidr: string): Promise<void> {
    await this.store.write(KEY, { podCidr });
  }
}
