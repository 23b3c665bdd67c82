/**
 * The Linux capabilities this host can grant a container.
 *
 * A process can only hand its children capabilities in its own bounding set.
 * On hosts where cridock (and so dockerd's runc, started the same way) runs
 * with a reduced bounding set, Docker's `CapAdd: ["ALL"]` and `Privileged`
 * ask runc for every capability Docker knows, and the container fails to
 * start with "unable to apply caps: operation not permitted". containerd
 * instead grants "ALL" as the capabilities the runtime itself holds; cridock
 * does the same by expanding "ALL" to the names in its bounding set.
 *
 * A privileged container cannot be narrowed that way: the engine sets its
 * capabilities itself. Whether that works on a restricted host depends on
 * the engine, not the host: Docker 20.10 asks for every capability it knows
 * and fails to start, a current engine grants those the host has. So a
 * privileged container is simply tried, and only when the engine fails to
 * start it for lack of capabilities is that failure turned into
 * FAILED_PRECONDITION naming what the host's bounding set lacks.
 */
import { readFile } from "node:fs/promises";
import { DockerError } from "../../docker/errors.ts";
import { CridockError } from "../../errors.ts";

/** Capability names by bit number (linux/capability.h), without the CAP_ prefix. */
export const CAPABILITY_NAMES: readonly string[] = [
  "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
  "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
  "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
  "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
  "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
  "CHECKPOINT_RESTORE",
];

/**
 * The last bit Docker 20.10 knows by name: it refuses CAP_PERFMON, CAP_BPF
 * and CAP_CHECKPOINT_RESTORE in CapAdd ("unknown capability"), so an
 * expanded "ALL" stops here.
 */
export const LAST_DOCKER_KNOWN_BIT = 37;

export interface HostCapabilities {
  /** CAP_-prefixed names of the known capabilities in cridock's bounding set, in bit order. */
  granted: string[];
  /** CAP_-prefixed names the kernel has but the bounding set lacks; empty on an unrestricted host. */
  missing: string[];
}

/** Parses a /proc/<pid>/status capability mask ("000001fffeffffff"). */
export function parseCapabilityMask(hex: string): bigint {
  const text = hex.trim();
  if (!/^[0-9a-fA-F]{1,32}$/.test(text)) throw new Error(`"${hex}" is not a capability mask`);
  return BigInt(`0x${text}`);
}

/**
 * Splits the known capabilities up to the kernel's last one (cap_last_cap)
 * into those the mask holds and those it lacks.
 */
export function classifyCapabilities(mask: bigint, lastCap: number): HostCapabilities {
  const result: HostCapabilities = { granted: [], missing: [] };
  const top = Math.min(lastCap, CAPABILITY_NAMES.length - 1);
  for (let bit = 0; bit <= top; bit++) {
    const name = `CAP_${CAPABILITY_NAMES[bit]}`;
    if (mask & (1n << BigInt(bit))) result.granted.push(name);
    else result.missing.push(name);
  }
  return result;
}

/** The capability bounding set from the text of /proc/<pid>/status. */
export function boundingSetMask(status: string): bigint {
  const line = /^CapBnd:\s*([0-9a-fA-F]+)\s*$/m.exec(status);
  if (!line) throw new Error("/proc/self/status has no CapBnd line");
  return parseCapabilityMask(line[1]!);
}

/** Reads this process's bounding set; the kernel's files are the only input. */
export async function readHostCapabilities(): Promise<HostCapabilities> {
  const mask = boundingSetMask(await readFile("/proc/self/status", "utf8"));
  const lastText = await readFile("/proc/sys/kernel/cap_last_cap", "utf8").catch(() => "");
  // Without cap_last_cap (very old kernels), trust the table.
  const lastCap = /^\d+$/.test(lastText.trim()) ? Number(lastText.trim()) : CAPABILITY_NAMES.length - 1;
  return classifyCapabilities(mask, lastCap);
}

let cached: Promise<HostCapabilities> | undefined;
/** The bounding set never grows, so it is read once per process. */
export function hostCapabilities(): Promise<HostCapabilities> {
  cached ??= readHostCapabilities().catch((err: unknown) => {
    cached = undefined;
    throw err;
  });
  return cached;
}

/** "net_admin" / "CAP_NET_ADMIN" → "CAP_NET_ADMIN", as Docker normalises names. */
export function canonicalCapability(name: string): string {
  const upper = name.toUpperCase();
  return upper.startsWith("CAP_") ? upper : `CAP_${upper}`;
}

/**
 * CapAdd with "ALL" replaced by the capabilities the host can grant, when it
 * cannot grant them all; unchanged on an unrestricted host (Docker's own ALL
 * is then the same set and needs no list). Docker applies CapDrop to an ALL
 * but not to named additions, so the dropped names are left out here.
 */
export function expandAll(capAdd: string[], capDrop: string[], host: HostCapabilities): string[] {
  if (host.missing.length === 0 || !capAdd.some((c) => c.toUpperCase() === "ALL")) return capAdd;
  const dropped = new Set(capDrop.map(canonicalCapability));
  const known = new Set(CAPABILITY_NAMES.slice(0, LAST_DOCKER_KNOWN_BIT + 1).map((n) => `CAP_${n}`));
  const out = host.granted.filter((c) => known.has(c) && !dropped.has(c));
  for (const c of capAdd) {
    const name = canonicalCapability(c);
    if (name !== "CAP_ALL" && !dropped.has(name) && !out.includes(name)) out.push(name);
  }
  return out;
}

/** runc's words when the kernel refuses the capabilities Docker asked for. */
const CAPS_REFUSED = /unable to apply caps|apply capabilit(y|ies)/i;

/**
 * The error to answer when the engine failed to start a privileged `what`:
 * FAILED_PRECONDITION with the host's missing capabilities when the engine
 * said it could not apply them, undefined for any other failure.
 */
export function privilegedStartFailure(err: unknown, host: HostCapabilities | undefined, what: string): CridockError | undefined {
  if (!(err instanceof DockerError) || !CAPS_REFUSED.test(err.dockerMessage)) return undefined;
  const lacking = host && host.missing.length > 0 ? `; this host's capability bounding set lacks ${host.missing.join(", ")}` : "";
  return new CridockError(
    "FAILED_PRECONDITION",
    `${what} is privileged, and this Docker engine cannot start privileged containers here: it asks for capabilities the host cannot grant${lacking} (current engines grant a privileged container the capabilities the host has)`,
    { cause: err },
  );
}
