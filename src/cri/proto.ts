/**
 * Loads the CRI wire contract (proto/runtime/v1/api.proto) with protobufjs and
 * turns its two services into @grpc/grpc-js service definitions.
 *
 * Decoded messages are plain objects with camelCase fields, every field present
 * (scalars at their defaults, absent sub-messages as null), int64 as bigint and
 * enums as numbers: the shapes described in proto-types.ts.
 */
import { readFileSync } from "node:fs";
import protobuf from "protobufjs";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";

/**
 * The proto's text, embedded by scripts/build/bundle.ts in the bundle and the
 * self-contained executable, which must not depend on a file beside them
 * (the executable has no package folder at all). Undefined when running the
 * sources, which read the file.
 */
declare const CRIDOCK_PROTO_TEXT: string | undefined;
const EMBEDDED_PROTO = typeof CRIDOCK_PROTO_TEXT === "string" ? CRIDOCK_PROTO_TEXT : undefined;

/** The proto in the source tree (src/cri/ → proto/); not read when the text is embedded. */
export const PROTO_PATH = EMBEDDED_PROTO === undefined ? new URL("../../proto/runtime/v1/api.proto", import.meta.url) : "embedded:proto/runtime/v1/api.proto";

export const DECODE_OPTIONS: protobuf.IConversionOptions = {
  longs: BigInt as unknown as protobuf.IConversionOptions["longs"],
  enums: Number,
  defaults: true,
  arrays: true,
  objects: true,
};

export function loadCriRoot(path?: URL | string): protobuf.Root {
  const text = path === undefined && EMBEDDED_PROTO !== undefined ? EMBEDDED_PROTO : readFileSync(path ?? PROTO_PATH, "utf8");
  const root = protobuf.parse(text, { keepCase: false }).root;
  root.resolveAll();
  return root;
}

let cachedRoot: protobuf.Root | undefined;
export function criRoot(): protobuf.Root {
  cachedRoot ??= loadCriRoot();
  return cachedRoot;
}

/** A message already in wire form (see repeated-encoding.ts): the codec sends its bytes unchanged. */
export class EncodedMessage {
  constructor(readonly bytes: Buffer) {}
}

export function messageCodec<T>(type: protobuf.Type) {
  return {
    serialize(value: T): Buffer {
      if (value instanceof EncodedMessage) return value.bytes;
      return Buffer.from(type.encode(type.fromObject(value as Record<string, unknown>)).finish());
    },
    deserialize(bytes: Buffer): T {
      return type.toObject(type.decode(bytes), DECODE_OPTIONS) as T;
    },
  };
}

/**
 * A request whose bytes are not a valid message of its RPC's type. grpc-js
 * answers a throwing deserializer with INTERNAL "Error deserializing
 * request"; handing this on instead lets the server answer INVALID_ARGUMENT
 * naming the RPC (a client's fault, not ours).
 */
export class UndecodableRequest {
  constructor(readonly typeName: string, readonly reason: string) {}
}

function requestDecoder(type: protobuf.Type): (bytes: Buffer) => unknown {
  const decode = messageCodec<unknown>(type).deserialize;
  return (bytes) => {
    try {
      return decode(bytes);
    } catch (err) {
      return new UndecodableRequest(type.fullName.replace(/^\./, ""), err instanceof Error ? err.message : String(err));
    }
  };
}

/** A grpc-js ServiceDefinition for `runtime.v1.<serviceName>`, with protobufjs codecs. */
export function serviceDefinition(serviceName: "RuntimeService" | "ImageService", root = criRoot()): ServiceDefinition {
  const service = root.lookupService(`runtime.v1.${serviceName}`);
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methodsArray) {
    method.resolve();
    const request = messageCodec<unknown>(method.resolvedRequestType!);
    const response = messageCodec<unknown>(method.resolvedResponseType!);
    definition[method.name] = {
      path: `/runtime.v1.${serviceName}/${method.name}`,
      requestStream: Boolean(method.requestStream),
      responseStream: Boolean(method.responseStream),
      requestSerialize: request.serialize,
      requestDeserialize: requestDecoder(method.resolvedRequestType!),
      responseSerialize: response.serialize,
      responseDeserialize: response.deserialize,
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return definition as ServiceDefinition;
}

export function methodNames(serviceName: "RuntimeService" | "ImageService", root = criRoot()): string[] {
  return root.lookupService(`runtime.v1.${serviceName}`).methodsArray.map((m) => m.name);
}
