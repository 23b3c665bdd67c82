// A sandbox that ListPodSandbox or PodSandboxStatus shows must carry its
// creation time from the first moment it is listed, also while
// RunPodSandbox is still starting the pause container (kubelet rejects a
// status without created_at: "status.CreatedAt is not set").
import t from "tap";
import { runningPauseInspect, sandboxSpec, scratchSandboxManager } from "../../../helpers/sandbox-fixtures.ts";

const ID = "a".repeat(64);

t.test("created_at is set while the pause container is still starting", async (t) => {
  let releaseStart!: () => void;
  const startGate = new Promise<void>((resolve) => (releaseStart = resolve));
  let startCalled!: () => void;
  const started = new Promise<void>((resolve) => (startCalled = resolve));
  // dockerd as seen by a list that was already in flight when the create
  // happened: the new container is not in it yet.
  const sandboxes = await scratchSandboxManager(t, {
    createContainer: async () => ({ Id: ID, Warnings: [] }),
    startContainer: async () => {
      startCalled();
      await startGate;
    },
    inspectContainer: async () => runningPauseInspect(ID, "2026-01-02T03:04:05.123456789Z"),
    inspectContainerCached: async () => runningPauseInspect(ID, "2026-01-02T03:04:05.123456789Z"),
    listContainers: async () => [],
  });
  const before = BigInt(Date.now()) * 1_000_000n;
  const running = sandboxes.run(sandboxSpec({ metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 } }));
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
