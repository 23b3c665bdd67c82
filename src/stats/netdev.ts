/**
 * Network counters of a pod, read from /proc/<pid>/net/dev of any process in
 * the pod's network namespace (the pause process): no nsenter, no Docker.
 */
import { readKernelFile } from "./kernel-file.ts";

export interface InterfaceCounters {
  name: string;
  rxBytes: bigint;
  rxPackets: bigint;
  rxErrors: bigint;
  rxDropped: bigint;
  txBytes: bigint;
  txPackets: bigint;
  txErrors: bigint;
  txDropped: bigint;
}

/** Parses the /proc/net/dev table; loopback is left out (kubelet ignores it too). */
export function parseNetDev(text: string): InterfaceCounters[] {
  const out: InterfaceCounters[] = [];
  for (const line of text.split("\n").slice(2)) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const fields = line.slice(colon + 1).trim().split(/\s+/);
    if (name === "lo" || fields.length < 16) continue;
    // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit.
    out.push({
      name,
      rxBytes: BigInt(fields[0]!),
      rxPackets: BigInt(fields[1]!),
      rxErrors: BigInt(fields[2]!),
      rxDropped: BigInt(fields[3]!),
      txBytes: BigInt(fields[8]!),
      txPackets: BigInt(fields[9]!),
      txErrors: BigInt(fields[10]!),
      txDropped: BigInt(fields[11]!),
    });
  }
  return out;
}

export async function readNetDev(pid: number, proc = "/proc"): Promise<InterfaceCounters[]> {
  return parseNetDev(await readKernelFile(`${proc}/${pid}/net/dev`));
}
