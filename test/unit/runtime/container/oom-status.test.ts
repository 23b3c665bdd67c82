/**
 * ContainerStatus reports OOMKilled when the kernel logged the kill Docker
 * missed (kernel-oom-log.ts), and only for a container SIGKILLed: an exit
 * Docker already explains, or any other exit code, is left as Docker says.
 * dockerd and the kernel log are fakes.
 */
import t from "tap";
import { ContainerManager, type ContainerManagerOptions } from "../../../../src/runtime/container/manager.ts";
import { createLogger } from "../../../../src/log.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { LogFollowers } from "../../../../src/logs/followers.ts";

const CONTAINER = "c".repeat(64);

function managerFor(exitCode: number, dockerOom: boolean, kernelOom: boolean) {
  const asked: string[] = [];
  const docker = {
    // The client's event-checked inspect (ContainerStatus) is the same inspect here.
    inspectContainerCached: (id: string) => docker.inspectContainer(id),
    events: { announce: () => undefined },
    inspectContainer: async (Id: string) => ({
      Id,
      Name: "/k8s_c_p_ns_uid_0",
      Created: "2026-11-27T22:00:00.000000000Z",
      Image: "sha256:1",
      State: {
        Status: "exited",
        Running: false,
        Pid: 0,
        ExitCode: exitCode,
        OOMKilled: dockerOom,
        StartedAt: "2026-11-27T22:00:01.000000000Z",
        FinishedAt: "2026-11-27T22:00:02.000000000Z",
      },
      Config: { Labels: { "io.kubernetes.docker.type": "container" }, Image: "busybox" },
      HostConfig: { LogConfig: { Type: "json-file" } },
      Mounts: [],
    }),
  } as unknown as DockerClient;
  const manager = new ContainerManager({
    docker,
    logs: { isFollowing: () => false } as unknown as LogFollowers,
    log: createLogger("silent"),
    sandboxes: {} as ContainerManagerOptions["sandboxes"],
    images: {} as ContainerManagerOptions["images"],
    files: {} as ContainerManagerOptions["files"],
    logMaxSize: "10m",
    logMaxFile: 3,
    oomKills: { killedIn: (id) => (asked.push(id), kernelOom) },
  });
  return { manager, asked };
}

t.test("exit 137, Docker saw no OOM, the kernel log did: OOMKilled", async (t) => {
  const { manager, asked } = managerFor(137, false, true);
  const s = await manager.status(CONTAINER);
  t.equal(s.reason, "OOMKilled");
  t.equal(s.exitCode, 137);
  t.same(asked, [CONTAINER]);
});

t.test("exit 137 with no kill in the kernel log stays an Error", async (t) => {
  const { manager } = managerFor(137, false, false);
  t.equal((await manager.status(CONTAINER)).reason, "Error");
});

t.test("the kernel log is not read when Docker already knows, or the exit was no SIGKILL", async (t) => {
  for (const [code, dockerOom, reason] of [
    [137, true, "OOMKilled"],
    [1, false, "Error"],
    [0, false, "Completed"],
  ] as const) {
    const { manager, asked } = managerFor(code, dockerOom, true);
    t.equal((await manager.status(CONTAINER)).reason, reason, `exit ${code}`);
    t.same(asked, [], `exit ${code}: not asked`);
  }
});
