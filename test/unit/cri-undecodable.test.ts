/**
 * Bytes that are not a message of the RPC's request type are the client's
 * fault: INVALID_ARGUMENT naming the RPC, never grpc-js's default INTERNAL
 * "Error deserializing request", and the server keeps serving.
 */
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { CriServer } from "../../src/cri/server.ts";
import { createLogger } from "../../src/log.ts";

const dir = await mkdtemp(join(tmpdir(), "cridock-undecodable-"));
const socketPath = join(dir, "cri.sock");
const server = new CriServer({
  socketPath,
  logger: createLogger("silent" as never),
  runtimeHandlers: {
    Version: async () => ({ version: "0.1.0" }),
    ListContainers: async () => ({ containers: [] }),
    StreamContainers: async () => undefined,
  },
  imageHandlers: { ListImages: async () => ({ images: [] }) },
});
await server.start();
const client = new grpc.Client(`unix://${socketPath}`, grpc.credentials.createInsecure());
t.teardown(async () => {
  client.close();
  await server.stop(1000);
  await rm(dir, { recursive: true, force: true });
});

const identity = (b: Buffer) => b;

function unaryRaw(path: string, bytes: Buffer): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, identity, identity, bytes, (err) => resolve({ code: err?.code ?? 0, details: err?.details ?? "" }));
  });
}

function streamRaw(path: string, bytes: Buffer): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => {
    const call = client.makeServerStreamRequest(path, identity, identity, bytes);
    call.on("data", () => undefined);
    call.on("error", (err: grpc.ServiceError) => resolve({ code: err.code, details: err.details }));
    call.on("end", () => resolve({ code: 0, details: "" }));
  });
}

// Field 1 as a length-delimited string claiming 100 bytes that are not there.
const truncated = Buffer.from([0x0a, 0x64, 0x61]);
// A varint that never ends.
const endlessVarint = Buffer.alloc(12, 0xff);
// Wire type 7 does not exist.
const badWireType = Buffer.from([0x0f]);

for (const [name, bytes] of [["a truncated field", truncated], ["an endless varint", endlessVarint], ["an unknown wire type", badWireType]] as const) {
  t.test(`${name}: INVALID_ARGUMENT naming the RPC`, async (t) => {
    for (const path of ["/runtime.v1.RuntimeService/Version", "/runtime.v1.RuntimeService/ListContainers", "/runtime.v1.ImageService/ListImages"]) {
      const r = await unaryRaw(path, bytes);
      t.equal(r.code, grpc.status.INVALID_ARGUMENT, `${path} answers INVALID_ARGUMENT`);
      t.match(r.details, path.slice(1), "the message names the RPC");
    }
    const s = await streamRaw("/runtime.v1.RuntimeService/StreamContainers", bytes);
    t.equal(s.code, grpc.status.INVALID_ARGUMENT, "a streaming RPC too");
  });
}

t.test("the server still serves valid calls", async (t) => {
  const r = await unaryRaw("/runtime.v1.RuntimeService/Version", Buffer.alloc(0));
  t.equal(r.code, 0);
});
