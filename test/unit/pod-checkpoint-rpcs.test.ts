/**
 * CheckpointPod and RestorePod (cri-api v0.37) are in the RuntimeService's
 * handler table, behind the start-up gate as the other pod calls are, and
 * carry their requests to the runtime's pod checkpointer and restorer (here
 * fakes that record them): over a real gRPC call on a unix socket, as
 * kubelet or scripts/pod-checkpoint.ts make it. The call's deadline reaches
 * the runtime as its signal.
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
import { invalidArgument } from "../../src/errors.ts";
import type { PodCheckpointRequest } from "../../src/runtime/pod-checkpoint/checkpoint.ts";
import type { PodRestoreRequest } from "../../src/runtime/pod-checkpoint/restore.ts";

const seen: { checkpoint?: PodCheckpointRequest; restore?: PodRestoreRequest; signal?: AbortSignal } = {};
const podCheckpoints = {
  checkpointer: {
    checkpoint: async (request: PodCheckpointRequest, signal: AbortSignal) => {
      seen.checkpoint = request;
      seen.signal = signal;
      if (request.options.bad) throw invalidArgument('CheckpointPod: unknown option "bad"; cridock takes no options for it');
      return { path: request.outputPath, bytes: 1, containers: [], pausedMs: 0 };
    },
  },
  restorer: {
    restore: async (request: PodRestoreRequest) => {
      seen.restore = request;
      return { sandboxId: "d".repeat(64), containers: [{ name: "count", id: "e".repeat(64) }] };
    },
  },
};
const table = runtimeServiceRpcs({ podCheckpoints } as never);
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

function call(method: string, request: Record<string, unknown>): Promise<{ err?: grpc.ServiceError; response?: Record<string, unknown> }> {
  const type = criRoot().lookupType(`runtime.v1.${method}Request`);
  const responseType = criRoot().lookupType(`runtime.v1.${method}Response`);
  const bytes = Buffer.from(type.encode(type.fromObject(request)).finish());
  const identity = (b: Buffer) => b;
  return new Promise((resolve) =>
    client.makeUnaryRequest(`/runtime.v1.RuntimeService/${method}`, identity, identity, bytes, { deadline: Date.now() + 10_000 }, (err, value) =>
      resolve(err ? { err } : { response: responseType.toObject(responseType.decode(value!)) as Record<string, unknown> }),
    ),
  );
}

t.test("every RuntimeService RPC of cri-api v0.37 has a handler in the table", async (t) => {
  t.same(Object.keys(table).sort(), methodNames("RuntimeService").sort());
  t.notOk(UNGATED_METHODS.has("CheckpointPod") || UNGATED_METHODS.has("RestorePod"), "pod calls wait for the start's reconciliation");
});

t.test("CheckpointPod carries its request and the call's deadline to the checkpointer", async (t) => {
  const { err } = await call("CheckpointPod", { podSandboxId: "a".repeat(64), outputPath: "/var/lib/kubelet/checkpoints/pod.tar", containerIds: ["b".repeat(64)], options: {} });
  t.equal(err, undefined);
  t.same(seen.checkpoint, { sandboxId: "a".repeat(64), outputPath: "/var/lib/kubelet/checkpoints/pod.tar", containerIds: ["b".repeat(64)], options: {} });
  t.ok(seen.signal instanceof AbortSignal, "the deadline as a signal");
  const refused = await call("CheckpointPod", { podSandboxId: "a".repeat(64), outputPath: "/p.tar", options: { bad: "1" } });
  t.equal(refused.err?.code, grpc.status.INVALID_ARGUMENT);
  t.match(refused.err?.details, /unknown option "bad"/);
});

t.test("RestorePod: the sandbox config and container configs converted, the new ids answered", async (t) => {
  const { err, response } = await call("RestorePod", {
    checkpointPath: "/var/lib/kubelet/checkpoints/pod.tar",
    config: { metadata: { name: "web", namespace: "default", uid: "u2", attempt: 1 }, logDirectory: "/var/log/pods/x" },
    runtimeHandler: "runc",
    containerConfigs: [{ metadata: { name: "count" }, workingDir: "/w" }],
  });
  t.equal(err, undefined);
  t.same(response, { podSandboxId: "d".repeat(64), restoredContainers: [{ name: "count", containerId: "e".repeat(64) }] });
  t.match(seen.restore, {
    checkpointPath: "/var/lib/kubelet/checkpoints/pod.tar",
    sandbox: { metadata: { name: "web", namespace: "default", uid: "u2", attempt: 1 }, logDirectory: "/var/log/pods/x", runtimeHandler: "runc" },
    runtimeHandler: "runc",
    containers: [{ name: "count", workingDir: "/w" }],
  });
  await call("RestorePod", { checkpointPath: "/p.tar" });
  t.equal(seen.restore?.sandbox, undefined, "no config: the checkpointed sandbox's");
  const unnamed = await call("RestorePod", { checkpointPath: "/p.tar", containerConfigs: [{ envs: [] }] });
  t.equal(unnamed.err?.code, grpc.status.INVALID_ARGUMENT);
  t.match(unnamed.err?.details, /container_configs\[0\] has no metadata.name/);
});
