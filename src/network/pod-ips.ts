/**
 * A pod's IP addresses read from its live network namespace, for pods whose
 * CNI result cridock never saw (taken over from cri-dockerd). Run once, at
 * adoption; the result is then kept in cridock's checkpoint like any CNI
 * result. `ip -j addr` (iproute2) inside the namespace through util-linux
 * nsenter: structured output, the interface named, and global-scope
 * addresses only (no loopback, no IPv6 link-local).
 */
import { execFile } from "node:child_process";

interface IpAddrEntry {
  ifname?: string;
  addr_info?: { family?: string; local?: string; scope?: string }[];
}

/** Global addresses of `ifName` in `ip -j addr` output, IPv4 first. */
export function parseIpAddrJson(text: string, ifName: string): string[] {
  let entries: IpAddrEntry[];
  try {
    entries = JSON.parse(text) as IpAddrEntry[];
  } catch (err) {
    throw new Error(`ip -j addr printed something that is not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(entries)) throw new Error("ip -j addr did not print a list");
  const v4: string[] = [];
  const v6: string[] = [];
  for (const e of entries) {
    if (e.ifname !== ifName) continue;
    for (const a of e.addr_info ?? []) {
      if (a.scope !== "global" || typeof a.local !== "string") continue;
      if (a.family === "inet") v4.push(a.local);
      else if (a.family === "inet6") v6.push(a.local);
    }
  }
  return [...v4, ...v6];
}

/** The pod's addresses on `ifName`, read inside the namespace at `netnsPath` (a handle or /proc/<pid>/ns/net). */
export function readPodIps(netnsPath: string, ifName = "eth0", timeoutMs = 10_000): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile("nsenter", [`--net=${netnsPath}`, "ip", "-j", "addr", "show"], { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`reading the addresses in ${netnsPath}: ${String(stderr).trim() || err.message}`));
        return;
      }
      try {
        resolve(parseIpAddrJson(String(stdout), ifName));
      } catch (e) {
        reject(e);
      }
    });
  });
}
