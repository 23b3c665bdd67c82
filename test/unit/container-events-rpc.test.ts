// GetContainerEvents over a real gRPC server on a unix socket: events reach
// every client encoded as kubelet reads them, and a client's cancel ends its
// subscription on the server.
import t from "tap";
import * as grpc from "@grpc/grpc-js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CriServer } from "../../src/cri/server.ts";
import { containerEventRpcs } from "../../src/cri/container-events-rpcs.ts";
import { serviceDefinition } from "../../src/cri/proto.ts";
import { PodEventFeed } from "../../src/runtime/container-events.ts";
import type { ContainerEventListener } from "../../src/docker/events.ts";
import type { ContainerInfo } from "../../src/runtime/container/spec.ts";
import { createLogger } from "../../src/log.ts";

const SANDBOX = "5".repeat(64);
const CONTAINER = "c".repeat(64);

t.test("events stream to every client; a cancel unsubscribes", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-events-rpc-"));
  const log = createLogger("silent");
  const listeners = new Set<ContainerEventListener>();
  const feed = new PodEventFeed({
    events: { subscribe: (l) => (listeners.add(l), () => listeners.delete(l)) },
    sandboxStatus: async (id) => ({
      id,
      metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 },
      ready: true,
      createdAt: 7n,
      labels: { app: "web" },
      annotations: {},
      runtimeHandler: "",
      ips: ["10.0.0.2"],
      namespaces: { network: "pod", pid: "pod", ipc: "pod", targetId: "" },
      info: { containerState: "running" },
    }),
    containerStatuses: async () => [
      {
        id: CONTAINER, sandboxId: SANDBOX, name: "app", attempt: 0, image: "busybox", imageId: "sha256:1", state: "running",
        createdAt: 8n, labels: {}, annotations: {}, startedAt: 9n, finishedAt: 0n, exitCode: 0, reason: "", message: "",
        mounts: [], logPath: "", resources: {}, stopSignal: "", info: {},
      } as unknown as ContainerInfo,
    ],
    log,
  });
  const socketPath = join(dir, "cri.sock");
  const server = new CriServer({ socketPath, logger: log, runtimeHandlers: containerEventRpcs({ containerEvents: feed }), imageHandlers: {} });
  await server.start();
  const Runtime = grpc.makeGenericClientConstructor(serviceDefinition("RuntimeService"), "RuntimeService");
  const client = new Runtime(`unix://${socketPath}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
  t.teardown(async () => {
    client.close();
    feed.close();
    await server.stop(1000);
    await rm(dir, { recursive: true, force: true });
  });

  const open = () => {
    const call = client.GetContainerEvents!({}) as grpc.ClientReadableStream<Record<string, any>>;
    const got: Record<string, any>[] = [];
    call.on("data", (m) => got.push(m));
    call.on("error", () => undefined);
    return { call, got };
  };
  const a = open();
  const b = open();
  for (let i = 0; i < 100 && feed.subscriberCount < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(feed.subscriberCount, 2, "both clients subscribed");
  for (const l of listeners) l({ id: CONTAINER, action: "start", timeNanos: 1n, attributes: { "io.kubernetes.docker.type": "container", "io.kubernetes.sandbox.id": SANDBOX } });
  for (let i = 0; i < 100 && (a.got.length < 1 || b.got.length < 1); i++) await new Promise((r) => setTimeout(r, 20));
  for (const { got } of [a, b]) {
    t.equal(got.length, 1);
    const e = got[0]!;
    t.equal(e.containerId, CONTAINER);
    t.equal(e.containerEventType, 1, "CONTAINER_STARTED_EVENT");
    t.equal(e.podSandboxStatus.metadata.uid, "u1");
    t.equal(e.podSandboxStatus.state, 0, "SANDBOX_READY");
    t.equal(e.podSandboxStatus.network.ip, "10.0.0.2");
    t.same(e.containersStatuses.map((c: { id: string; state: string }) => [c.id, c.state]), [[CONTAINER, 1]]);
    t.ok(BigInt(e.createdAt) > 0n, "stamped");
  }
  a.call.cancel();
  for (let i = 0; i < 100 && feed.subscriberCount > 1; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(feed.subscriberCount, 1, "the cancelled client's subscription is gone");
});
