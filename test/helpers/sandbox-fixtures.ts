// What the sandbox unit tests share: a valid SandboxSpec, a running pause
// container as dockerd inspects it, and a SandboxManager on a scratch
// directory with a fake Docker client, so each test states only what it varies.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SandboxManager } from "../../src/runtime/sandbox/manager.ts";
import { CheckpointStore } from "../../src/store/checkpoint.ts";
import type { SandboxRecord } from "../../src/runtime/sandbox/record.ts";
import type { SandboxSpec } from "../../src/runtime/sandbox/spec.ts";
import type { DockerClient } from "../../src/docker/client.ts";
import { DockerBridgeNetwork } from "../../src/network/plugin.ts";
import { createLogger } from "../../src/log.ts";

type ManagerOptions = ConstructorParameters<typeof SandboxManager>[0];

/** A pod spec that validates, with `overrides` laid over it. */
export function sandboxSpec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    metadata: { name: "web", namespace: "default", uid: "0b6c-11", attempt: 0 },
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
    ...overrides,
  };
}

/** dockerd's inspect of a running pause container created at `created`. */
export function runningPauseInspect(id: string, created: string) {
  return {
    Id: id,
    Created: created,
    State: { Running: true, Pid: 4242, ExitCode: 0, Error: "", Status: "running" },
    NetworkSettings: { Networks: { bridge: { IPAddress: "172.17.0.9" } } },
    HostConfig: {},
    Config: { Image: "pause" },
  };
}

/**
 * A SandboxManager over `docker` (only the methods a test needs), keeping
 * its checkpoints in a scratch directory removed at the test's teardown.
 */
export async function scratchSandboxManager(
  t: { teardown(fn: () => unknown): void },
  docker: Partial<Record<keyof DockerClient, unknown>>,
  overrides: Partial<ManagerOptions> = {},
): Promise<SandboxManager> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-sandbox-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return new SandboxManager({
    docker: docker as unknown as DockerClient,
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
    ...overrides,
  });
}
