/**
 * CheckpointPod and RestorePod (cri-api v0.37) are in the RuntimeService's
 * handler table, behind the start-up gate as the other pod calls are, and
 * answer UNIMPLEMENTED saying what cridock does instead: over a real gRPC
 * call on a unix socket, as kubelet or a client script would make it.
 */
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { CriServer } from "../../src/cri/server.ts";
import { runtimeServiceRpcs } from "../../src/cri/runtime-service.ts";
import { StartupGate, UNGATED_METHODS } from "../../src/cri/startup-gate.ts";
import { criRoot, methodNames } from "../../src/cri/proto.ts";
import { createLogger } from "../../src/log.ts";

// No RPC here reaches a dependency: the table is built without any.
const table = runtimeServiceRpcs({} as never);
const gate = new StartupGate("recovery");
gate.open();

const dir = await mkdtemp(join(tmpdir(), "cridock-pod-checkpoint-"));
const socketPath = join(dir, "cri.sock");
const server = new CriServer({ socketPath, logger: createLogger("silent" as never), runtimeHandlers: gate.guard(table), imageHandlers: {} });
await server.start();
const client = new grpc.Client(`unix://${socketPath}`, grpc.credentials.createInsecure(), { "grpc.enable_channelz": 0 });
t.teardown(async () => {
  client.close();
  await server.stop(1000);
  await rm(dir, { recursive: true, force: true });
});

function call(method: string, request: Record<string, unknown>): Promise<grpc.ServiceError | undefined> {
  const type = criRoot().lookupType(`runtime.v1.${method}Request`);
  const bytes = Buffer.from(type.encode(type.fromObject(request)).finish());
  const identity = (b: Buffer) => b;
  return new Promise((resolve) =>
    client.makeUnaryRequest(`/runtime.v1.RuntimeService/${method}`, identity, identity, bytes, { deadline: Date.now() + 10_000 }, (err) => resolve(err ?? undefined)),
  );
}

t.test("every RuntimeService RPC of cri-api v0.37 has a handler in the table", async (t) => {
  t.same(Object.keys(table).sort(), methodNames("RuntimeService").sort());
  t.notOk(UNGATED_METHODS.has("CheckpointPod") || UNGATED_METHODS.has("RestorePod"), "pod calls wait for the start's reconciliation");
});

t.test("CheckpointPod answers UNIMPLEMENTED with what cridock does instead", async (t) => {
  const err = await call("CheckpointPod", { podSandboxId: "a".repeat(64), outputPath: "/var/lib/kubelet/checkpoints/pod", containerIds: ["b".repeat(64)], options: {} });
  t.equal(err?.code, grpc.status.UNIMPLEMENTED);
  t.match(err?.details, /^CheckpointPod: cridock does not checkpoint or restore whole pods yet; single containers are checkpointed with CheckpointContainer/);
});

t.test("RestorePod answers UNIMPLEMENTED with what cridock does instead", async (t) => {
  const err = await call("RestorePod", { checkpointPath: "/var/lib/kubelet/checkpoints/pod", config: { metadata: { name: "web", namespace: "default", uid: "u1" } }, containerConfigs: [{ metadata: { name: "app" } }] });
  t.equal(err?.code, grpc.status.UNIMPLEMENTED);
  t.match(err?.details, /^RestorePod: cridock does not checkpoint or restore whole pods yet/);
});
