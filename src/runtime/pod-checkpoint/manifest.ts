/**
 * The manifest of a pod checkpoint archive (pod.json): the sandbox's
 * configuration as cridock recorded it at RunPodSandbox, and per container
 * its configuration (what CreateContainer needs to make it again) and the
 * archive member holding its own checkpoint, which is a whole
 * CheckpointContainer archive (checkpoint-archive.ts): checkpointctl reads
 * each one once it is taken out of the pod archive.
 *
 * A restore reads the manifest from a file anyone able to write the path
 * could have made: parseManifest checks every field's type and bounds before
 * anything is created; the sandbox and container validators then check the
 * values as they check a request's.
 */
import { posix } from "node:path";
import { invalidArgument } from "../../errors.ts";
import type { ContainerSpec, MountSpec, Propagation } from "../container/spec.ts";
import type { SandboxSpec } from "../sandbox/spec.ts";
import type { NamespaceMode } from "../sandbox/view.ts";

export const POD_MANIFEST = "pod.json";
/** Where each container's checkpoint archive is in the pod archive: containers/<name>.tar. */
export const CONTAINERS_DIRECTORY = "containers";
export const POD_CHECKPOINT_KIND = "cridock.pod-checkpoint";
export const POD_CHECKPOINT_VERSION = 1;
/** A pod has a handful of containers; a manifest listing more than this is not one of ours. */
export const MAX_CONTAINERS = 64;
export const MAX_MANIFEST_BYTES = 1024 * 1024;

/**
 * A container's configuration as JSON can carry it: no resources or
 * security context (int64s, profiles): the restored container gets the
 * defaults unless RestorePod's container_configs name them.
 */
export type ManifestContainerSpec = Omit<ContainerSpec, "resources" | "security">;

export interface ManifestContainer {
  /** The checkpointed container's id (informational). */
  id: string;
  name: string;
  /** Its member in the pod archive: containers/<name>.tar. */
  archive: string;
  spec: ManifestContainerSpec;
}

export interface PodManifest {
  kind: typeof POD_CHECKPOINT_KIND;
  version: typeof POD_CHECKPOINT_VERSION;
  /** RFC 3339. */
  checkpointedAt: string;
  sandbox: { id: string; spec: SandboxSpec };
  containers: ManifestContainer[];
}

export function containerMember(name: string): string {
  return `${CONTAINERS_DIRECTORY}/${name}.tar`;
}

export function buildManifest(sandboxId: string, sandbox: SandboxSpec, containers: { id: string; spec: ManifestContainerSpec }[], at: Date): PodManifest {
  return {
    kind: POD_CHECKPOINT_KIND,
    version: POD_CHECKPOINT_VERSION,
    checkpointedAt: at.toISOString(),
    sandbox: { id: sandboxId, spec: sandbox },
    containers: containers.map((c) => ({ id: c.id, name: c.spec.name, archive: containerMember(c.spec.name), spec: c.spec })),
  };
}

type Value = unknown;
type Bad = (what: string) => Error;

/**
 * The manifest's JSON checked field by field; INVALID_ARGUMENT naming
 * `label` (the archive) and the first bad field.
 */
export function parseManifest(text: string, label: string): PodManifest {
  const bad: Bad = (what) => invalidArgument(`${label} is not a usable pod checkpoint archive: ${POD_MANIFEST} ${what}`);
  let value: Value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalidArgument(`${label} is not a usable pod checkpoint archive: ${POD_MANIFEST} is not JSON`, err);
  }
  const m = object(value, "", bad);
  if (m.kind !== POD_CHECKPOINT_KIND) throw bad(`has kind ${JSON.stringify(m.kind)}, not ${POD_CHECKPOINT_KIND}`);
  if (m.version !== POD_CHECKPOINT_VERSION) throw bad(`has version ${JSON.stringify(m.version)}; this cridock reads version ${POD_CHECKPOINT_VERSION}`);
  const checkpointedAt = string(m.checkpointedAt, "checkpointedAt", bad);
  const sandbox = object(m.sandbox, "sandbox", bad);
  const list = m.containers;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_CONTAINERS) throw bad(`containers is not a list of 1 to ${MAX_CONTAINERS} containers`);
  const seen = new Set<string>();
  const containers = list.map((item, i) => {
    const c = manifestContainer(item, `containers[${i}]`, bad);
    if (seen.has(c.name)) throw bad(`names container ${c.name} twice`);
    seen.add(c.name);
    return c;
  });
  return {
    kind: POD_CHECKPOINT_KIND,
    version: POD_CHECKPOINT_VERSION,
    checkpointedAt,
    sandbox: { id: string(sandbox.id, "sandbox.id", bad), spec: sandboxSpec(sandbox.spec, "sandbox.spec", bad) },
    containers,
  };
}

/** A name as invalidNamePart allows it is checked later; here: one path component, so the member stays in containers/. */
const MEMBER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;

function manifestContainer(value: Value, at: string, bad: Bad): ManifestContainer {
  const c = object(value, at, bad);
  const name = string(c.name, `${at}.name`, bad);
  if (!MEMBER_NAME.test(name)) throw bad(`${at}.name ${JSON.stringify(name.slice(0, 80))} is not a container name`);
  const archive = string(c.archive, `${at}.archive`, bad);
  if (archive !== containerMember(name)) throw bad(`${at}.archive is ${JSON.stringify(archive.slice(0, 120))}, not ${containerMember(name)}`);
  const spec = containerSpec(c.spec, `${at}.spec`, bad);
  if (spec.name !== name) throw bad(`${at}.spec.name is not ${name}`);
  return { id: string(c.id, `${at}.id`, bad), name, archive, spec };
}

function containerSpec(value: Value, at: string, bad: Bad): ManifestContainerSpec {
  const s = object(value, at, bad);
  return {
    name: string(s.name, `${at}.name`, bad),
    attempt: count(s.attempt, `${at}.attempt`, bad),
    image: string(s.image, `${at}.image`, bad),
    userImage: s.userImage === undefined ? undefined : string(s.userImage, `${at}.userImage`, bad),
    command: strings(s.command, `${at}.command`, bad),
    args: strings(s.args, `${at}.args`, bad),
    workingDir: string(s.workingDir, `${at}.workingDir`, bad),
    envs: list(s.envs, `${at}.envs`, bad).map((e, i) => {
      const env = object(e, `${at}.envs[${i}]`, bad);
      return { key: string(env.key, `${at}.envs[${i}].key`, bad), value: string(env.value, `${at}.envs[${i}].value`, bad) };
    }),
    mounts: list(s.mounts, `${at}.mounts`, bad).map((m, i) => mount(m, `${at}.mounts[${i}]`, bad)),
    devices: list(s.devices, `${at}.devices`, bad).map((d, i) => {
      const dev = object(d, `${at}.devices[${i}]`, bad);
      const where = `${at}.devices[${i}]`;
      return { containerPath: string(dev.containerPath, `${where}.containerPath`, bad), hostPath: string(dev.hostPath, `${where}.hostPath`, bad), permissions: string(dev.permissions, `${where}.permissions`, bad) };
    }),
    cdiDevices: strings(s.cdiDevices, `${at}.cdiDevices`, bad),
    labels: stringMap(s.labels, `${at}.labels`, bad),
    annotations: stringMap(s.annotations, `${at}.annotations`, bad),
    logPath: string(s.logPath, `${at}.logPath`, bad),
    stdin: boolean(s.stdin, `${at}.stdin`, bad),
    stdinOnce: boolean(s.stdinOnce, `${at}.stdinOnce`, bad),
    tty: boolean(s.tty, `${at}.tty`, bad),
    stopSignal: string(s.stopSignal, `${at}.stopSignal`, bad),
  };
}

const PROPAGATIONS: readonly Propagation[] = ["private", "host-to-container", "bidirectional"];

function mount(value: Value, at: string, bad: Bad): MountSpec {
  const m = object(value, at, bad);
  const propagation = string(m.propagation, `${at}.propagation`, bad) as Propagation;
  if (!PROPAGATIONS.includes(propagation)) throw bad(`${at}.propagation is not one of ${PROPAGATIONS.join(", ")}`);
  if (m.idMappings !== undefined) throw bad(`${at} has idMappings: a pod in its own user namespace cannot be restored`);
  const out: MountSpec = {
    containerPath: string(m.containerPath, `${at}.containerPath`, bad),
    hostPath: string(m.hostPath, `${at}.hostPath`, bad),
    readonly: boolean(m.readonly, `${at}.readonly`, bad),
    selinuxRelabel: boolean(m.selinuxRelabel, `${at}.selinuxRelabel`, bad),
    propagation,
    recursiveReadOnly: boolean(m.recursiveReadOnly, `${at}.recursiveReadOnly`, bad),
    image: string(m.image, `${at}.image`, bad),
    imageSubPath: string(m.imageSubPath, `${at}.imageSubPath`, bad),
  };
  if (m.mountOptions !== undefined) out.mountOptions = strings(m.mountOptions, `${at}.mountOptions`, bad);
  return out;
}

const MODES: readonly NamespaceMode[] = ["pod", "container", "node", "target"];

function sandboxSpec(value: Value, at: string, bad: Bad): SandboxSpec {
  const s = object(value, at, bad);
  const md = object(s.metadata, `${at}.metadata`, bad);
  const ns = object(s.namespaces, `${at}.namespaces`, bad);
  const mode = (v: Value, where: string): NamespaceMode => {
    const m = string(v, where, bad) as NamespaceMode;
    if (!MODES.includes(m)) throw bad(`${where} is not one of ${MODES.join(", ")}`);
    return m;
  };
  const sec = object(s.security, `${at}.security`, bad);
  const seccompValue = object(sec.seccomp, `${at}.security.seccomp`, bad);
  const seccompType = string(seccompValue.type, `${at}.security.seccomp.type`, bad);
  let seccomp: SandboxSpec["security"]["seccomp"];
  if (seccompType === "localhost") seccomp = { type: "localhost", path: string(seccompValue.path, `${at}.security.seccomp.path`, bad) };
  else if (seccompType === "unconfined" || seccompType === "runtime-default") seccomp = { type: seccompType };
  else throw bad(`${at}.security.seccomp.type is not unconfined, runtime-default or localhost`);
  if (s.userns !== undefined) throw bad(`${at} has a user namespace: a pod in its own user namespace cannot be restored`);
  const optionalId = (v: Value, where: string) => (v === undefined ? undefined : decimal(v, where, bad));
  const spec: SandboxSpec = {
    metadata: {
      name: string(md.name, `${at}.metadata.name`, bad),
      namespace: string(md.namespace, `${at}.metadata.namespace`, bad),
      uid: string(md.uid, `${at}.metadata.uid`, bad),
      attempt: count(md.attempt, `${at}.metadata.attempt`, bad),
    },
    hostname: string(s.hostname, `${at}.hostname`, bad),
    logDirectory: string(s.logDirectory, `${at}.logDirectory`, bad),
    portMappings: list(s.portMappings, `${at}.portMappings`, bad).map((p, i) => {
      const pm = object(p, `${at}.portMappings[${i}]`, bad);
      const where = `${at}.portMappings[${i}]`;
      const protocol = string(pm.protocol, `${where}.protocol`, bad);
      if (protocol !== "tcp" && protocol !== "udp" && protocol !== "sctp") throw bad(`${where}.protocol is not tcp, udp or sctp`);
      return { protocol, containerPort: count(pm.containerPort, `${where}.containerPort`, bad), hostPort: count(pm.hostPort, `${where}.hostPort`, bad), hostIp: string(pm.hostIp, `${where}.hostIp`, bad) };
    }),
    labels: stringMap(s.labels, `${at}.labels`, bad),
    annotations: stringMap(s.annotations, `${at}.annotations`, bad),
    cgroupParent: string(s.cgroupParent, `${at}.cgroupParent`, bad),
    sysctls: stringMap(s.sysctls, `${at}.sysctls`, bad),
    namespaces: {
      network: mode(ns.network, `${at}.namespaces.network`),
      pid: mode(ns.pid, `${at}.namespaces.pid`),
      ipc: mode(ns.ipc, `${at}.namespaces.ipc`),
      targetId: string(ns.targetId, `${at}.namespaces.targetId`, bad),
    },
    security: {
      privileged: boolean(sec.privileged, `${at}.security.privileged`, bad),
      readonlyRootfs: boolean(sec.readonlyRootfs, `${at}.security.readonlyRootfs`, bad),
      runAsUser: optionalId(sec.runAsUser, `${at}.security.runAsUser`),
      runAsGroup: optionalId(sec.runAsGroup, `${at}.security.runAsGroup`),
      supplementalGroups: strings(sec.supplementalGroups, `${at}.security.supplementalGroups`, bad).map((g, i) => decimal(g, `${at}.security.supplementalGroups[${i}]`, bad)),
      supplementalGroupsStrict: sec.supplementalGroupsStrict === undefined ? undefined : boolean(sec.supplementalGroupsStrict, `${at}.security.supplementalGroupsStrict`, bad),
      seccomp,
    },
    runtimeHandler: string(s.runtimeHandler, `${at}.runtimeHandler`, bad),
  };
  if (s.dns !== undefined && s.dns !== null) {
    const dns = object(s.dns, `${at}.dns`, bad);
    spec.dns = { servers: strings(dns.servers, `${at}.dns.servers`, bad), searches: strings(dns.searches, `${at}.dns.searches`, bad), options: strings(dns.options, `${at}.dns.options`, bad) };
  }
  return spec;
}

/** Strings are bounded: a manifest is small, and every string ends up in a Docker body or a label. */
const MAX_STRING = 64 * 1024;
const MAX_LIST = 4096;

function object(value: Value, at: string, bad: Bad): Record<string, Value> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw bad(`${at || "(the whole file)"} is not a JSON object`);
  return value as Record<string, Value>;
}

function string(value: Value, at: string, bad: Bad): string {
  if (typeof value !== "string") throw bad(`${at} is not a string`);
  if (value.length > MAX_STRING || value.includes("\0")) throw bad(`${at} is longer than ${MAX_STRING} characters or holds a NUL`);
  return value;
}

function boolean(value: Value, at: string, bad: Bad): boolean {
  if (typeof value !== "boolean") throw bad(`${at} is not true or false`);
  return value;
}

function count(value: Value, at: string, bad: Bad): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw bad(`${at} is not a non-negative integer`);
  return value as number;
}

function decimal(value: Value, at: string, bad: Bad): string {
  if (typeof value !== "string" || !/^(0|[1-9][0-9]{0,18})$/.test(value)) throw bad(`${at} is not a decimal id`);
  return value;
}

function list(value: Value, at: string, bad: Bad): Value[] {
  if (!Array.isArray(value) || value.length > MAX_LIST) throw bad(`${at} is not a list (of at most ${MAX_LIST})`);
  return value;
}

function strings(value: Value, at: string, bad: Bad): string[] {
  return list(value, at, bad).map((v, i) => string(v, `${at}[${i}]`, bad));
}

function stringMap(value: Value, at: string, bad: Bad): Record<string, string> {
  const o = object(value, at, bad);
  const entries = Object.entries(o);
  if (entries.length > MAX_LIST) throw bad(`${at} has more than ${MAX_LIST} entries`);
  const out: Record<string, string> = {};
  for (const [k, v] of entries) {
    // A JSON "__proto__" key would set the object's prototype when assigned.
    if (k === "__proto__") throw bad(`${at} has the key __proto__`);
    out[string(k, `${at} key`, bad)] = string(v, `${at}[${JSON.stringify(k.slice(0, 40))}]`, bad);
  }
  return out;
}

/** A manifest member name: what a pod archive may hold besides the manifest. */
export function isContainerMember(name: string): boolean {
  return name.startsWith(`${CONTAINERS_DIRECTORY}/`) && posix.dirname(name) === CONTAINERS_DIRECTORY && name.endsWith(".tar");
}
