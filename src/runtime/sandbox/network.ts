/**
 * A sandbox's pod network, as RunPodSandbox, StopPodSandbox, RemovePodSandbox
 * and recovery ask the network layer for it: the request built from the
 * checkpoint, and ADD beside the netns pin.
 */
import type { PodNetwork, PodNetworkRequest } from "../../network/plugin.ts";
import { pinNetns } from "../../network/netns.ts";
import type { StepTimer } from "../../steps.ts";
import type { SandboxRecord } from "./record.ts";
import { bandwidthFromAnnotations } from "./spec.ts";

/** The bandwidth annotations, or none when they do not parse (they were validated at create). */
export function bandwidthFromAnnotationsSafe(annotations: Record<string, string>) {
  try {
    return bandwidthFromAnnotations(annotations);
  } catch {
    return undefined;
  }
}

/**
 * Pins the pod's netns and runs CNI ADD side by side: ADD works on the
 * pause process's /proc/<pid>/ns/net (as dockershim did) while `mount`
 * makes the persistent handle, and the sandbox is ready only once both
 * are done, so CNI DEL always has a namespace. A failed pin leaves no
 * handle (DEL then uses the path cached at ADD while the pause lives).
 */
export async function attachNetwork(
network: PodNetwork,
record: SandboxRecord,
  pid: number,
  bandwidth: ReturnType<typeof bandwidthFromAnnotationsSafe>,
  timer: StepTimer,
  signal: AbortSignal | undefined,
  onStep: (step: string) => void,
): Promise<void> {
  const handle = record.netnsPath;
  const [pinned, added] = await Promise.allSettled([
    timer.time("netns.pin", () => pinNetns(pid, handle), 1),
    network.setUp({ ...networkRequest(record, bandwidth), netnsPath: `/proc/${pid}/ns/net`, pid, timer }, signal),
  ]);
  if (pinned.status === "rejected") {
    record.netnsPath = "";
    onStep("pinning the network namespace");
    throw pinned.reason;
  }
  if (added.status === "rejected") throw added.reason;
  const attachment = added.value;
  record.network = { phase: "attached", name: attachment.networkName, ips: attachment.ips, result: attachment.result };
  if (attachment.ips.length === 0) throw new Error(`network ${attachment.networkName} returned no IP address for the pod`);
}

export function networkRequest(record: SandboxRecord, bandwidth = bandwidthFromAnnotationsSafe(record.spec.annotations)): PodNetworkRequest {
  const { spec } = record;
  return {
    sandboxId: record.id,
    pod: { name: spec.metadata.name, namespace: spec.metadata.namespace, uid: spec.metadata.uid },
    netnsPath: record.netnsPath,
    portMappings: spec.portMappings,
    bandwidth,
    dns: spec.dns,
  };
}
