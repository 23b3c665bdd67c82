/**
 * A pod's IP addresses read from its live network namespace, for pods whose
 * CNI result cridock never saw (taken over from cri-dockerd). Run once, at
 * adoption; the result is then kept in cridock's checkpoint like any CNI
 * result. `ip -j addr` (iproute2) inside the namespace through util-linux
 * nsenter: structured output, the interface named, and global-scope
 * addresses only (no loopback, no IPv6 link-local). Run from the spawner's
 * worker threads, like the plugins, so a takeover of many pods at start
 * never holds the event loop in fork and exec.
 */
import { runProcess } from "./spawner.ts";

interface IpAddrEntry {
  ifname?: string;
  addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[];
}

/** Global addresses of `ifName` in `ip -j addr` output, IPv4 first. */
export function parseIpAddrJson(text: string, ifName: string): string[] {
  return parseIpAddrCidrs(text, ifName).map((cidr) => cidr.slice(0, cidr.lastIndexOf("/")));
}

/** The same addresses with their prefix lengths ("10.89.0.7/16"). */
export function parseIpAddrCidrs(text: string, ifName: string): string[] {
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
      const cidr = `${a.local}/${typeof a.prefixlen === "number" ? a.prefixlen : a.family === "inet" ? 32 : 128}`;
      if (a.family === "inet") v4.push(cidr);
      else if (a.family === "inet6") v6.push(cidr);
    }
  }
  return [...v4, ...v6];
}

/** The pod's addresses (CIDR form) on `ifName`, read inside the namespace at `netnsPath` (a handle or /proc/<pid>/ns/net). */
export async function readPodAddresses(netnsPath: string, ifName = "eth0", timeoutMs = 10_000): Promise<string[]> {
  const r = await runProcess({ command: "nsenter", args: [`--net=${netnsPath}`, "ip", "-j", "addr", "show"], timeoutMs });
  if (r.code !== 0 || r.killedFor || r.spawnError) {
    const why = r.stderr.trim() || r.killedFor || r.spawnError?.message || `exit status ${r.code ?? r.signal}`;
    throw new Error(`reading the addresses in ${netnsPath}: ${why}`, r.spawnError ? { cause: r.spawnError } : undefined);
  }
  return parseIpAddrCidrs(r.stdout, ifName);
}

/**
 * A CNI result describing what the namespace shows, for DEL's prevResult
 * when the real ADD result was not kept: plugins that undo per-address
 * state (firewall, portmap) find the pod's addresses in it.
 */
export function resultFromAddresses(cniVersion: string, netnsPath: string, ifName: string, cidrs: string[]): Record<string, unknown> {
  return {
    cniVersion,
    interfaces: [{ name: ifName, sandbox: netnsPath }],
    ips: cidrs.map((address) => ({ address, interface: 0, ...(cniVersion.startsWith("0.") ? { version: address.includes(":") ? "6" : "4" } : {}) })),
  };
}
