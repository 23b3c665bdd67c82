// A sandbox that ListPodSandbox or PodSandboxStatus shows must carry its
// creation time from the first moment it is listed, also while
// RunPodSandbox is still starting the pause container (kubelet rejects a
// status without created_at: "status.CreatedAt is not set").
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SandboxManager } from "../../../../src/runtime/sandbox/manager.ts";
import { CheckpointStore } from "../../../../src/store/checkpoint.ts";
import type { SandboxRecord } from "../../../../src/runtime/sandbox/record.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import { DockerBridgeNetwork } from "../../../../src/network/plugin.ts";
import { createLogger } from "../../../../src/log.ts";

const ID = "a".repeat(64);

t.test("created_at is set while the pause container is still starting", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-created-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  let releaseStart!: () => void;
  const startGate = new Promise<void>((resolve) => (releaseStart = resolve));
  let startCalled!: () => void;
  const started = new Promise<void>((resolve) => (startCalled = resolve));
  // dockerd as seen by a list that was already in flight when the create
  // happened: the new container is not in it yet.
  const docker = {
    createContainer: async () => ({ Id: ID, Warnings: [] }),
    startContainer: async () => {
      startCalled();
      await startGate;
    },
    inspectContainer: async () => ({
      Id: ID,
      Created: "2026-01-02T03:04:05.123456789Z",
      State: { Running: true, Pid: 4242, ExitCode: 0, Error: "", Status: "running" },
      NetworkSettings: { Networks: { bridge: { IPAddress: "172.17.0.9" } } },
      HostConfig: {},
      Config: { Image: "pause" },
    }),
    listContainers: async () => [],
  } as unknown as DockerClient;
  const sandboxes = new SandboxManager({
    docker,
    network: new DockerBridgeNetwork(),
    store: new CheckpointStore<SandboxRecord>(join(dir, "sandbox")),
    log: createLogger("silent"),
    pauseImage: "pause",
    ensureImage: async () => ({ id: "sha256:pause" }),
    files: { readText: async () => undefined, exists: async () => false },
    rootDirectory: dir,
    logMaxSize: "",
    logMaxFile: 0,
    cgroupDriver: async () => "cgroupfs",
    runtimeNames: async () => [],
  });
  const before = BigInt(Date.now()) * 1_000_000n;
  const running = sandboxes.run({
    metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 },
    hostname: "web",
    logDirectory: "",
    portMappings: [],
    labels: {},
    annotations: {},
    cgroupParent: "",
    sysctls: {},
    namespaces: { network: "pod", pid: "pod", ipc: "pod", targetId: "" },
    security: { privileged: false, readonlyRootfs: false, supplementalGroups: [], seccomp: { type: "unconfined" } },
    runtimeHandler: "",
  });
  await started;
  const listed = await sandboxes.list();
  t.equal(listed.length, 1, "the sandbox being created is listed");
  t.ok(listed[0]!.createdAt >= before, `ListPodSandbox has a creation time (${listed[0]!.createdAt})`);
  const status = await sandboxes.status(ID);
  t.ok(status.createdAt >= before, `PodSandboxStatus has a creation time (${status.createdAt})`);
  releaseStart();
  t.equal(await running, ID);
  t.equal((await sandboxes.status(ID)).createdAt, 1767323045123456789n, "once started, Docker's own creation time");
});
