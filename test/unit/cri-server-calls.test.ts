/**
 * What the CRI server does around each call, beyond the handler: a call's
 * signal is aborted when the client cancels it while it runs, and only then
 * (grpc-js reports "cancelled" after every answered call too, and building
 * the CANCELLED error for each cost every call an Error and its stack); and
 * no channelz bookkeeping (grpc-js registers the server and every connection
 * in its channelz registry unless told not to; nothing in cridock reads it).
 */
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { CriServer } from "../../src/cri/server.ts";
import type { CallContext } from "../../src/cri/handlers.ts";
import { createLogger } from "../../src/log.ts";

const dir = await mkdtemp(join(tmpdir(), "cridock-server-calls-"));
const socketPath = join(dir, "cri.sock");
const signals: AbortSignal[] = [];
let releaseSlow: (() => void) | undefined;
const server = new CriServer({
  socketPath,
  logger: createLogger("silent" as never),
  runtimeHandlers: {
    Version: async (_request: unknown, ctx: CallContext) => {
      signals.push(ctx.signal);
      return { version: "0.1.0" };
    },
    // Answers only once the client has gone (or the test releases it).
    Status: async (_request: unknown, ctx: CallContext) => {
      signals.push(ctx.signal);
      await new Promise<void>((resolve) => {
        releaseSlow = resolve;
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      return {};
    },
  },
  imageHandlers: {},
});
await server.start();
// The client keeps channelz off too, so the registry holds only what the server put there.
const client = new grpc.Client(`unix://${socketPath}`, grpc.credentials.createInsecure(), { "grpc.enable_channelz": 0 });
t.teardown(async () => {
  releaseSlow?.();
  client.close();
  await server.stop(1000);
  await rm(dir, { recursive: true, force: true });
});

const identity = (b: Buffer) => b;
const tick = () => new Promise((r) => setTimeout(r, 50));

t.test("an answered call's signal is never aborted", async (t) => {
  for (let i = 0; i < 3; i++) {
    await new Promise<void>((resolve, reject) =>
      client.makeUnaryRequest("/runtime.v1.RuntimeService/Version", identity, identity, Buffer.alloc(0), (err) => (err ? reject(err) : resolve())),
    );
  }
  await tick();
  t.equal(signals.length, 3, "the handler ran for each call");
  t.same(
    signals.map((s) => s.aborted),
    [false, false, false],
    "no signal aborted after its call was answered",
  );
});

t.test("a call the client cancels while it runs is aborted with CANCELLED", async (t) => {
  signals.length = 0;
  const call = client.makeUnaryRequest("/runtime.v1.RuntimeService/Status", identity, identity, Buffer.alloc(0), () => undefined);
  while (signals.length === 0) await tick();
  call.cancel();
  for (let i = 0; i < 40 && !signals[0]!.aborted; i++) await tick();
  t.ok(signals[0]!.aborted, "the handler's signal is aborted");
  t.match(String((signals[0]!.reason as Error).message), /cancelled by the client/);
});

t.test("the server keeps nothing in grpc-js's channelz registry", async (t) => {
  const servers = await new Promise<unknown[]>((resolve, reject) =>
    (grpc.getChannelzHandlers().GetServers as unknown as (call: unknown, cb: (err: unknown, value: { server: unknown[] }) => void) => void)(
      { request: { start_server_id: "0", max_results: "100" } },
      (err, value) => (err ? reject(err) : resolve(value.server)),
    ),
  );
  t.equal(servers.length, 0, "no server registered in channelz");
});
