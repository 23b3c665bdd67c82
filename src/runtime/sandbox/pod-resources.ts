/**
 * UpdatePodSandboxResources: kubelet tells the runtime the pod-level
 * resources (overhead and the sum of its containers) after an in-place
 * resize. kubelet itself owns and resizes the pod cgroup that Docker's
 * containers sit under (their cgroup parent), so cridock has nothing to
 * apply; it validates the values and records them in the sandbox checkpoint,
 * where PodSandboxStatus (verbose) reports them back. The `unified` keys are
 * held to the same syntax as a container's (a cgroup interface file name,
 * one line of value) and, like the rest, written nowhere.
 */
import { failedPrecondition, invalidArgument, notFound } from "../../errors.ts";
import { validateUnified } from "../../cgroup-unified-keys.ts";
import type { LinuxResourcesRecord, PodResourcesRecord } from "./record.ts";
import type { SandboxManager } from "./manager.ts";

/** The integer fields of LinuxContainerResources that must not be negative (cpu_quota may be -1). */
const NON_NEGATIVE = ["cpuPeriod", "cpuShares", "memoryLimitInBytes"];

export function validatePodResources(name: string, r: LinuxResourcesRecord | null): void {
  if (!r) return;
  const unified = r.unified;
  if (unified && typeof unified === "object" && !Array.isArray(unified)) validateUnified(unified);
  for (const [key, value] of Object.entries(r)) {
    if (typeof value !== "string" || !/^-?\d+$/.test(value)) continue;
    const n = BigInt(value);
    if (NON_NEGATIVE.includes(key) && n < 0n) throw invalidArgument(`${name}.${key} ${value} is negative`);
    if (key === "cpuQuota" && n < -1n) throw invalidArgument(`${name}.cpu_quota ${value} is below -1`);
  }
}

export async function recordPodResources(
  sandboxes: SandboxManager,
  idOrPrefix: string,
  update: Omit<PodResourcesRecord, "updatedAt">,
): Promise<void> {
  validatePodResources("overhead", update.overhead);
  validatePodResources("resources", update.resources);
  const found = await sandboxes.resolve(idOrPrefix);
  if (!found) throw notFound(`pod sandbox "${idOrPrefix}" not found`);
  await sandboxes.withLock(found.id, async () => {
    const record = sandboxes.records.get(found.id);
    if (!record) {
      throw failedPrecondition(`pod sandbox ${found.id} has no cridock checkpoint (it was not created or adopted by cridock)`);
    }
    const podResources: PodResourcesRecord = { ...update, updatedAt: (BigInt(Date.now()) * 1_000_000n).toString() };
    await sandboxes.saveRecord({ ...record, podResources });
  });
}
