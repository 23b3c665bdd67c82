/**
 * Which boot of the machine cridock last ran in, kept under the root
 * directory: the kernel's boot_id, random at each boot. A start that finds
 * another boot's id knows that the machine rebooted (cleanly or not) since:
 * every process of every pod died with it, and with them the network
 * namespaces, veths and netns mounts; but what lives on disk stayed, the
 * CNI plugins' IP reservations (host-local keeps them in /var/lib/cni)
 * among them. Sandbox recovery releases those at once (recovery.ts)
 * rather than leaving them to kubelet's StopPodSandbox, which a node being
 * retired, or a kubelet that does not come back, never sends.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { StoredString } from "./checkpoint.ts";

/** Where Linux says which boot this is. */
export const BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id";

/** This boot's id ("" where the kernel has none to read). */
export async function currentBootId(path = BOOT_ID_PATH): Promise<string> {
  try {
    return (await readFile(path, "utf8")).trim();
  } catch {
    return "";
  }
}

/**
 * Whether the machine booted since the boot a previous run recorded. Never
 * on a first run (nothing recorded) nor where the id is unknown: then
 * nothing is released that a pod might still use.
 */
export function bootedSince(recorded: string | undefined, current: string): boolean {
  return Boolean(recorded && current && recorded !== current);
}

/** The boot id last recorded, or undefined (never recorded, or unreadable). */
export class BootStore extends StoredString {
  constructor(rootDirectory: string) {
    super(join(rootDirectory, "boot"), "boot", "bootId");
  }
}
