/**
 * CheckpointPod and RestorePod from a shell: crictl has no verb for them
 * (cri-api v0.37, KEP-5823), so this client calls them on cridock's socket
 * with the repository's own proto. Run it with the repository's tsx:
 *
 *   node_modules/.bin/tsx scripts/ops/pod-checkpoint.ts [options] checkpoint POD_ID OUTPUT_PATH [CONTAINER_ID...]
 *   node_modules/.bin/tsx scripts/ops/pod-checkpoint.ts [options] restore CHECKPOINT_PATH [--config POD.json] [--container-config CTR.json]... [--runtime-handler NAME]
 *
 * options: --endpoint unix:///var/run/cridock.sock (the default),
 *          --timeout SECONDS (the call's deadline; 600 by default).
 * POD.json and CTR.json are crictl's files (PodSandboxConfig and
 * ContainerConfig, the proto's field names in snake_case or camelCase).
 * Paths are the node's: cridock reads and writes them, not this script.
 *
 * Prints the answer as one JSON line, with the call's duration; on failure
 * prints the gRPC code and cridock's message to stderr and exits 1.
 */
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import type protobuf from "protobufjs";
import { criRoot } from "../../src/cri/proto.ts";

export interface Invocation {
  endpoint: string;
  timeoutSeconds: number;
  method: "CheckpointPod" | "RestorePod";
  request: Record<string, unknown>;
}

const USAGE =
  "usage: pod-checkpoint.ts [--endpoint URL] [--timeout SECONDS] checkpoint POD_ID OUTPUT_PATH [CONTAINER_ID...]\n" +
  "       pod-checkpoint.ts [--endpoint URL] [--timeout SECONDS] restore CHECKPOINT_PATH [--config POD.json] [--container-config CTR.json]... [--runtime-handler NAME]";

/** The command line as a call; throws the usage on a mistake. */
export function parseArguments(argv: readonly string[], readJson = (path: string) => JSON.parse(readFileSync(path, "utf8")) as unknown): Invocation {
  let endpoint = "unix:///var/run/cridock.sock";
  let timeoutSeconds = 600;
  const words: string[] = [];
  let config: unknown;
  const containerConfigs: unknown[] = [];
  let runtimeHandler = "";
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    if (arg === "--endpoint") endpoint = value();
    else if (arg === "--timeout") {
      timeoutSeconds = Number(value());
      if (!(timeoutSeconds > 0)) throw new Error(`--timeout must be a positive number of seconds\n${USAGE}`);
    } else if (arg === "--config") config = readJson(value());
    else if (arg === "--container-config") containerConfigs.push(readJson(value()));
    else if (arg === "--runtime-handler") runtimeHandler = value();
    else if (arg.startsWith("--")) throw new Error(`unknown option ${arg}\n${USAGE}`);
    else words.push(arg);
  }
  const [verb, ...rest] = words;
  const root = criRoot();
  if (verb === "checkpoint" && rest.length >= 2) {
    const [podSandboxId, outputPath, ...containerIds] = rest;
    return { endpoint, timeoutSeconds, method: "CheckpointPod", request: { podSandboxId, outputPath, containerIds } };
  }
  if (verb === "restore" && rest.length === 1) {
    const request: Record<string, unknown> = { checkpointPath: rest[0], runtimeHandler };
    if (config !== undefined) request.config = fromJson(root.lookupType("runtime.v1.PodSandboxConfig"), config);
    request.containerConfigs = containerConfigs.map((c) => fromJson(root.lookupType("runtime.v1.ContainerConfig"), c));
    return { endpoint, timeoutSeconds, method: "RestorePod", request };
  }
  throw new Error(USAGE);
}

/**
 * crictl's JSON (snake_case names, strings for bytes such as an env's
 * value) as protobufjs's object for `type`: field names camelCased by the
 * type's own fields, so that map keys (labels, annotations) stay as given.
 */
export function fromJson(type: protobuf.Type, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`${type.name}: not a JSON object`);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const name = key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
    const field = type.fields[name];
    if (!field) throw new Error(`${type.name} has no field ${key}`);
    field.resolve();
    const one = (x: unknown): unknown => {
      if (field.resolvedType && "fields" in field.resolvedType) return fromJson(field.resolvedType as protobuf.Type, x);
      if (field.type === "bytes" && typeof x === "string") return Buffer.from(x, "utf8");
      return x;
    };
    if (field.map) out[name] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, one(x)]));
    else if (field.repeated) out[name] = (v as unknown[]).map(one);
    else out[name] = one(v);
  }
  return out;
}

/** Makes the call; the answer as a plain object. */
export function invoke({ endpoint, timeoutSeconds, method, request }: Invocation): Promise<Record<string, unknown>> {
  const root = criRoot();
  const requestType = root.lookupType(`runtime.v1.${method}Request`);
  const responseType = root.lookupType(`runtime.v1.${method}Response`);
  const bytes = Buffer.from(requestType.encode(requestType.fromObject(request)).finish());
  const client = new grpc.Client(endpoint, grpc.credentials.createInsecure());
  const identity = (b: Buffer) => b;
  return new Promise<Record<string, unknown>>((resolve, reject) => {
    client.makeUnaryRequest(`/runtime.v1.RuntimeService/${method}`, identity, identity, bytes, { deadline: Date.now() + timeoutSeconds * 1000 }, (err, answer) => {
      if (err) reject(err);
      else resolve(responseType.toObject(responseType.decode(answer!), { defaults: true, arrays: true }) as Record<string, unknown>);
    });
  }).finally(() => client.close());
}

async function main(): Promise<void> {
  let invocation: Invocation;
  try {
    invocation = parseArguments(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const started = performance.now();
  try {
    const answer = await invoke(invocation);
    process.stdout.write(`${JSON.stringify({ ...answer, ms: Math.round(performance.now() - started) })}\n`);
  } catch (err) {
    const e = err as grpc.ServiceError;
    process.stderr.write(`${invocation.method} failed after ${Math.round(performance.now() - started)} ms: ${grpc.status[e.code] ?? e.code}: ${e.details ?? e.message}\n`);
    process.exit(1);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
