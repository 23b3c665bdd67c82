/**
 * cri-dockerd's sandbox checkpoints, read (never written) when cridock takes
 * over a node from cri-dockerd: `<cri-dockerd root>/sandbox/<sandbox id>`,
 * plain JSON without a suffix:
 *
 *   {"version":"v1","name":…,"namespace":…,
 *    "data":{"port_mappings":[{"protocol":"tcp","container_port":80,
 *            "host_port":8080,"host_ip":"…"}],"host_network":false},
 *    "checksum":<uint32>}
 *
 * The checksum is FNV-32a over go-spew's "%#v" rendering of the data
 * (type core.CheckpointData, port mappings *config.PortMapping), as
 * cri-dockerd computes it; a mismatch means the file was damaged, and
 * cri-dockerd itself would refuse it. Every field is validated: the file is
 * input like any other.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export interface CriDockerdPortMapping {
  protocol?: string;
  containerPort?: number;
  hostPort?: number;
  hostIp: string;
}

export interface CriDockerdCheckpoint {
  version: string;
  name: string;
  namespace: string;
  /** undefined when the file has no port_mappings (Go's nil slice). */
  portMappings: CriDockerdPortMapping[] | undefined;
  hostNetwork: boolean;
  checksum: number;
  /** Whether the checksum matches the data. */
  checksumValid: boolean;
}

export class CriDockerdCheckpointError extends Error {
  constructor(readonly path: string, message: string) {
    super(`cri-dockerd checkpoint ${path}: ${message}`);
    this.name = "CriDockerdCheckpointError";
  }
}

const ID = /^[0-9a-f]{64}$/;
const PROTOCOLS = new Set(["tcp", "udp", "sctp"]);

/** FNV-1a, 32 bits, over UTF-8 bytes. */
export function fnv32a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** go-spew's "%#v" of cri-dockerd's CheckpointData (the bytes its checksum hashes). */
export function spewCheckpointData(portMappings: CriDockerdPortMapping[] | undefined, hostNetwork: boolean): string {
  const ptr = (type: string, value: string | number | undefined) => `(*${type})${value === undefined ? "<nil>" : value}`;
  let mappings: string;
  if (portMappings === undefined) mappings = "<nil>";
  else {
    const items = portMappings.map(
      (p) =>
        `<*>{Protocol:${ptr("config.Protocol", p.protocol)} ContainerPort:${ptr("int32", p.containerPort)} ` +
        `HostPort:${ptr("int32", p.hostPort)} HostIP:(string)${p.hostIp}}`,
    );
    mappings = `[${items.join(" ")}]`;
  }
  return `(core.CheckpointData){PortMappings:([]*config.PortMapping)${mappings} HostNetwork:(bool)${hostNetwork}}`;
}

function int32(path: string, field: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 65535) {
    throw new CriDockerdCheckpointError(path, `${field} ${JSON.stringify(value)} is not a port number`);
  }
  return value;
}

/** Parses and validates a checkpoint's text. Throws CriDockerdCheckpointError. */
export function parseCriDockerdCheckpoint(path: string, text: string): CriDockerdCheckpoint {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CriDockerdCheckpointError(path, `not JSON (${(err as Error).message})`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new CriDockerdCheckpointError(path, "not a JSON object");
  const o = raw as Record<string, unknown>;
  if (o.version !== "v1") throw new CriDockerdCheckpointError(path, `unknown version ${JSON.stringify(o.version)} (v1 is known)`);
  if (typeof o.name !== "string" || typeof o.namespace !== "string" || !o.name || !o.namespace) {
    throw new CriDockerdCheckpointError(path, "name and namespace must be non-empty strings");
  }
  const data = (o.data ?? {}) as Record<string, unknown>;
  if (typeof data !== "object" || Array.isArray(data)) throw new CriDockerdCheckpointError(path, "data is not an object");
  let portMappings: CriDockerdPortMapping[] | undefined;
  if (data.port_mappings !== undefined && data.port_mappings !== null) {
    if (!Array.isArray(data.port_mappings)) throw new CriDockerdCheckpointError(path, "port_mappings is not a list");
    portMappings = data.port_mappings.map((item: unknown, i: number) => {
      if (typeof item !== "object" || item === null) throw new CriDockerdCheckpointError(path, `port_mappings[${i}] is not an object`);
      const p = item as Record<string, unknown>;
      if (p.protocol !== undefined && (typeof p.protocol !== "string" || !PROTOCOLS.has(p.protocol))) {
        throw new CriDockerdCheckpointError(path, `port_mappings[${i}].protocol ${JSON.stringify(p.protocol)} is not tcp, udp or sctp`);
      }
      if (p.host_ip !== undefined && typeof p.host_ip !== "string") throw new CriDockerdCheckpointError(path, `port_mappings[${i}].host_ip is not a string`);
      return {
        protocol: p.protocol as string | undefined,
        containerPort: int32(path, `port_mappings[${i}].container_port`, p.container_port),
        hostPort: int32(path, `port_mappings[${i}].host_port`, p.host_port),
        hostIp: (p.host_ip as string | undefined) ?? "",
      };
    });
  }
  if (data.host_network !== undefined && typeof data.host_network !== "boolean") {
    throw new CriDockerdCheckpointError(path, "host_network is not a boolean");
  }
  const hostNetwork = data.host_network === true;
  if (typeof o.checksum !== "number" || !Number.isInteger(o.checksum) || o.checksum < 0) {
    throw new CriDockerdCheckpointError(path, "checksum is not a non-negative integer");
  }
  return {
    version: o.version,
    name: o.name,
    namespace: o.namespace,
    portMappings,
    hostNetwork,
    checksum: o.checksum,
    checksumValid: fnv32a(spewCheckpointData(portMappings, hostNetwork)) === o.checksum,
  };
}

/** The checkpoint of sandbox `id` under cri-dockerd's root, undefined when there is none. */
export async function readCriDockerdCheckpoint(root: string, id: string): Promise<CriDockerdCheckpoint | undefined> {
  if (!ID.test(id)) throw new Error(`"${id}" is not a sandbox id`);
  const path = join(root, "sandbox", id);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw new CriDockerdCheckpointError(path, `unreadable (${(err as Error).message})`);
  }
  if (text.length > 1 << 20) throw new CriDockerdCheckpointError(path, "larger than 1 MiB");
  return parseCriDockerdCheckpoint(path, text);
}

/** Writes nothing: renders a checkpoint as cri-dockerd would (for tests and the reverse-direction docs). */
export function formatCriDockerdCheckpoint(name: string, namespace: string, portMappings: CriDockerdPortMapping[] | undefined, hostNetwork: boolean): string {
  const data: Record<string, unknown> = {};
  if (portMappings && portMappings.length > 0) {
    data.port_mappings = portMappings.map((p) => ({
      ...(p.protocol !== undefined ? { protocol: p.protocol } : {}),
      ...(p.containerPort !== undefined ? { container_port: p.containerPort } : {}),
      ...(p.hostPort !== undefined ? { host_port: p.hostPort } : {}),
      ...(p.hostIp ? { host_ip: p.hostIp } : {}),
    }));
  }
  if (hostNetwork) data.host_network = true;
  // cri-dockerd marshals the data it holds: an empty list is omitted and unmarshals as nil.
  const forSum = portMappings && portMappings.length > 0 ? portMappings : undefined;
  return JSON.stringify({ version: "v1", name, namespace, data, checksum: fnv32a(spewCheckpointData(forSum, hostNetwork)) });
}
