/**
 * A gRPC fuzzer over all 43 CRI RPCs: random bytes, mutated valid messages
 * and messages full of hostile field values (huge, negative, path-like,
 * control characters, ids of things that exist and do not), a few thousand
 * calls. Every answer must be a sensible code, never UNKNOWN or INTERNAL;
 * cridock must stay up; afterwards nothing is left.
 *
 * PullImage requests are checked before they are sent: only references to
 * the local test registry (or ones that cannot parse) go out, so the fuzzer
 * never makes dockerd reach for another registry.
 */
import t from "tap";
import * as grpc from "@grpc/grpc-js";
import { randomBytes } from "node:crypto";
import type protobuf from "protobufjs";
import { criRoot } from "../../src/cri/proto.ts";
import { BUSYBOX_IMAGE, REGISTRY } from "../helpers/env.ts";
import { FAULT_LABEL, leakCount, leaks, podConfig, removeAllPods, startFaultEnv } from "./env.ts";

/** Keys a request must not set: cridock's io.cridock. namespace and the labels it reads back (a sandbox labelled io.cridock.scratch was force-removed at the next start). */
const RESERVED_KEYS = [
  "io.cridock.scratch",
  "io.cridock.root",
  "io.cridock.userns",
  "io.cridock.unified",
  "io.cridock.restore-from",
  "io.cridock.",
  "io.kubernetes.docker.type",
  "io.kubernetes.sandbox.id",
  "io.kubernetes.container.logpath",
];

const ROUNDS = Number(process.env.CRIDOCK_FUZZ_ROUNDS ?? 40);
const CALL_TIMEOUT_MS = 30_000;

const env = await startFaultEnv();
t.teardown(() => env.close());
const client = env.cridock.client;
await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });

// Something real for the ids to name.
const pod = podConfig(env, `fuzz-${process.pid}`);
const sandboxId: string = (await client.call("RunPodSandbox", { config: pod })).podSandboxId;
const containerId: string = (
  await client.call("CreateContainer", {
    podSandboxId: sandboxId,
    config: { metadata: { name: "fuzzed", attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "600"], logPath: "fuzzed.log", labels: { [FAULT_LABEL]: "1" } },
    sandboxConfig: pod,
  })
).containerId;
await client.call("StartContainer", { containerId });

const root = criRoot();
const services = ["RuntimeService", "ImageService"].map((name) => root.lookupService(`runtime.v1.${name}`));
const methods = services.flatMap((s) => s.methodsArray.map((m) => ({ service: s.name, method: m, path: `/runtime.v1.${s.name}/${m.name}` })));
const raw = new grpc.Client(`unix://${env.cridock.socketPath}`, grpc.credentials.createInsecure(), { "grpc.max_send_message_length": 16 << 20, "grpc.max_receive_message_length": 16 << 20 });
t.teardown(() => raw.close());

const HOSTILE_STRINGS = [
  "", " ", "..", "../../../../etc/passwd", "/", "\u0000", "a\u0000b", "\n\r\t", "💥", "\ud800", "x".repeat(70_000), "%s%n", "${HOME}",
  "-1", "0", "18446744073709551616", "k8s_POD_a_b_c_0", "a_b", "sha256:", "sha256:" + "0".repeat(64), "0".repeat(64), "g".repeat(12),
  sandboxId, containerId, sandboxId.slice(0, 3), containerId.slice(0, 12), BUSYBOX_IMAGE, `${REGISTRY}/none:1`, `${REGISTRY}/cridock-test/busybox@sha256:${"0".repeat(64)}`,
  "unix:///var/run/docker.sock", "http://127.0.0.1:1/", "127.0.0.1:99999", "ALL", "SYS_ADMIN", "/proc/self/ns/net", "/dev/null", "runtime/default", "localhost/../../x",
  // Label and annotation keys cridock keeps for itself (runtime/labels.ts): as map keys, they must be refused, never acted on.
  ...RESERVED_KEYS,
];
const HOSTILE_NUMBERS = [0, -1, 1, 2, 127, 65535, 65536, 2 ** 31 - 1, -(2 ** 31), 2 ** 32];
const HOSTILE_LONGS = [0n, -1n, 1n, 9_223_372_036_854_775_807n, -9_223_372_036_854_775_808n, 1_000_000_000_000n];

function pick<T>(list: readonly T[]): T {
  return list[Math.floor(Math.random() * list.length)]!;
}

/** A message of `type` with hostile values in (most of) its fields. */
function hostile(type: protobuf.Type, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    if (Math.random() < 0.25) continue;
    field.resolve();
    const value = () => hostileValue(field, depth);
    if (field.map) {
      const map: Record<string, unknown> = {};
      for (let i = 0; i < 1 + Math.floor(Math.random() * 3); i++) map[pick(HOSTILE_STRINGS).slice(0, 300)] = value();
      out[field.name] = map;
    } else if (field.repeated) {
      out[field.name] = Array.from({ length: Math.floor(Math.random() * 4) }, value);
    } else {
      out[field.name] = value();
    }
  }
  return out;
}

function hostileValue(field: protobuf.Field, depth: number): unknown {
  if (field.resolvedType && "fieldsArray" in field.resolvedType) return depth > 4 ? {} : hostile(field.resolvedType as protobuf.Type, depth + 1);
  if (field.resolvedType) return pick([...Object.values((field.resolvedType as protobuf.Enum).values), 99, -5]);
  switch (field.type) {
    case "string":
      return pick(HOSTILE_STRINGS);
    case "bytes":
      return randomBytes(Math.floor(Math.random() * 64));
    case "bool":
      return Math.random() < 0.5;
    case "int64":
    case "sint64":
    case "sfixed64":
      return pick(HOSTILE_LONGS).toString();
    case "uint64":
    case "fixed64":
      return pick([0n, 1n, 18_446_744_073_709_551_615n]).toString();
    case "uint32":
    case "fixed32":
      return pick([0, 1, 4_294_967_295]);
    case "double":
    case "float":
      return pick([0, -1, 1e308, Number.NaN, Number.POSITIVE_INFINITY]);
    default:
      return pick(HOSTILE_NUMBERS);
  }
}

function encode(type: protobuf.Type, value: Record<string, unknown>): Buffer {
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

/** Flips, inserts, deletes or truncates bytes. */
function mutate(bytes: Buffer): Buffer {
  const b = Buffer.from(bytes);
  const kind = Math.floor(Math.random() * 4);
  if (b.length === 0 || kind === 0) return Buffer.concat([b, randomBytes(1 + Math.floor(Math.random() * 8))]);
  const at = Math.floor(Math.random() * b.length);
  if (kind === 1) {
    for (let i = 0; i < 1 + Math.floor(Math.random() * 4); i++) {
      const j = Math.floor(Math.random() * b.length);
      b[j] = b[j]! ^ (1 << Math.floor(Math.random() * 8));
    }
    return b;
  }
  if (kind === 2) return Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + Math.floor(Math.random() * 4))]);
  return b.subarray(0, at);
}

/**
 * Requests that could act on anything but the fuzzer's own objects are not
 * sent: dockerd is shared, so an id prefix that is not one of ours could
 * name someone else's container, and a PullImage or RemoveImage of a real
 * reference would reach another registry or remove a shared image.
 */
function safeToSend(path: string, type: protobuf.Type, bytes: Buffer): boolean {
  let decoded: unknown;
  try {
    decoded = type.toObject(type.decode(bytes), { longs: String, bytes: String });
  } catch {
    return true; // undecodable: answered before anything is looked up
  }
  const strings: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === "string") strings.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) (strings.push(k), walk(x));
  };
  walk(decoded);
  const ours = (s: string) => sandboxId.startsWith(s) || containerId.startsWith(s);
  if (strings.some((s) => /^[0-9a-f]{1,64}$/i.test(s) && !ours(s.toLowerCase()))) return false;
  if (path.endsWith("/PullImage") || path.endsWith("/RemoveImage")) {
    const image = (decoded as { image?: { image?: string } }).image?.image ?? "";
    const local = image.startsWith(`${REGISTRY}/`) && !image.startsWith(`${REGISTRY}/cridock-test/`);
    const unparseable = !/^[a-z0-9]/.test(image) || /\s|[A-Z]|\.\./.test(image);
    return image === "" || unparseable || (path.endsWith("/PullImage") ? image.startsWith(`${REGISTRY}/`) : local);
  }
  return true;
}

const identity = (b: Buffer) => b;
/** How long an open stream may stay silent before it counts as accepted. */
const STREAM_QUIET_MS = 1_000;

function send(path: string, streaming: boolean, bytes: Buffer): Promise<number> {
  const deadline = Date.now() + CALL_TIMEOUT_MS;
  return new Promise((resolve) => {
    if (streaming) {
      const call = raw.makeServerStreamRequest(path, identity, identity, bytes, new grpc.Metadata(), { deadline });
      let settled = false;
      const done = (code: number) => {
        clearTimeout(quiet);
        if (!settled) resolve(code);
        settled = true;
        call.cancel();
      };
      // GetContainerEvents sends nothing until a container changes: a stream
      // still open and quiet after a moment accepted the request. Refusals
      // come at once.
      const quiet = setTimeout(() => done(0), STREAM_QUIET_MS);
      call.on("data", () => done(0)); // the stats streams run until cancelled: the first message is the answer
      call.on("error", (err: grpc.ServiceError) => done(err.code));
      call.on("end", () => done(0));
    } else {
      raw.makeUnaryRequest(path, identity, identity, bytes, new grpc.Metadata(), { deadline }, (err) => resolve(err?.code ?? 0));
    }
  });
}

t.test("reserved label and annotation keys are INVALID_ARGUMENT naming the key, on RunPodSandbox and CreateContainer, and create nothing", async (t) => {
  const code = (p: Promise<unknown>) => p.then(() => ({ code: 0, details: "" }), (err: { code?: number; details?: string }) => ({ code: err.code ?? -1, details: err.details ?? "" }));
  const before = (await client.call("ListContainers", {})).containers.length;
  for (const key of RESERVED_KEYS) {
    // io.kubernetes.* keys are refused as labels only: an annotation is stored apart, as annotation.<key>.
    const labelOnly = !key.startsWith("io.cridock.");
    const cases: [string, Record<string, unknown>][] = [["label", { labels: { ...(pod.labels as object), [key]: "x" } }]];
    if (!labelOnly) cases.push(["annotation", { annotations: { [key]: "x" } }]);
    for (const [what, extra] of cases) {
      const sandbox = await code(client.call("RunPodSandbox", { config: { ...podConfig(env, `fuzz-key-${process.pid}`), ...extra } }));
      t.equal(sandbox.code, grpc.status.INVALID_ARGUMENT, `RunPodSandbox with ${what} ${key}: INVALID_ARGUMENT`);
      t.ok(sandbox.details.includes(key), `and it names the key: ${sandbox.details}`);
      const container = await code(
        client.call("CreateContainer", {
          podSandboxId: sandboxId,
          config: { metadata: { name: "fuzz-key", attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["true"], labels: { [FAULT_LABEL]: "1" }, ...extra },
          sandboxConfig: pod,
        }),
      );
      t.equal(container.code, grpc.status.INVALID_ARGUMENT, `CreateContainer with ${what} ${key}: INVALID_ARGUMENT`);
      t.ok(container.details.includes(key), `and it names the key: ${container.details}`);
    }
  }
  t.equal((await client.call("ListContainers", {})).containers.length, before, "no container was created");
  t.same((await client.call("ListPodSandbox", {})).items.map((s: { id: string }) => s.id), [sandboxId], "no sandbox was created");
});

t.test(`fuzzing all ${methods.length} RPCs`, async (t) => {
  t.equal(methods.length, 43, "the CRI has 43 RPCs (v0.37 added CheckpointPod and RestorePod)");
  const codes = new Map<string, number>();
  const bad: string[] = [];
  let calls = 0;
  let skipped = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (const { method, path } of methods) {
      method.resolve();
      const type = method.resolvedRequestType!;
      const cases: [string, Buffer][] = [
        ["random", randomBytes(Math.floor(Math.random() * 96))],
        ["hostile", encode(type, hostile(type))],
        ["mutated", mutate(encode(type, hostile(type)))],
      ];
      for (const [kind, bytes] of cases) {
        if (!safeToSend(path, type, bytes)) {
          skipped++;
          continue;
        }
        const code = await send(path, Boolean(method.responseStream), bytes);
        calls++;
        const name = grpc.status[code] ?? String(code);
        codes.set(name, (codes.get(name) ?? 0) + 1);
        if (code === grpc.status.UNKNOWN || code === grpc.status.INTERNAL || code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED) {
          bad.push(`${method.name} (${kind}): ${name} for ${bytes.toString("base64").slice(0, 200)}`);
        }
      }
    }
    if (env.cridock.child.exitCode !== null) break;
  }
  t.comment(`fuzz calls: ${calls} (${skipped} not sent: they could name objects or images that are not the fuzzer's); codes: ${JSON.stringify(Object.fromEntries([...codes].sort((a, b) => b[1] - a[1])))}`);
  t.ok(calls >= 2000, `a few thousand calls (${calls})`);
  t.same(bad.slice(0, 20), [], "no UNKNOWN, INTERNAL, UNAVAILABLE or DEADLINE_EXCEEDED answer");
  t.equal(env.cridock.child.exitCode, null, "cridock is still running");
  t.equal((await client.call("Version", {})).version, "0.1.0", "and serving");
  await removeAllPods(env);
  const { containers } = await client.call("ListContainers", {});
  t.same(containers, [], "no container is left");
  t.equal(leakCount(await leaks(env)), 0, "nothing leaked");
});
