/**
 * Start, Stop and Remove ask dockerd what they must and no more.
 * StartContainer: one inspect of the container (under its lock, which is
 * where its state is judged), its start, and for an id prefix the list that
 * resolves it; unknown ids and sandboxes are NOT_FOUND; a container that ran
 * already is FAILED_PRECONDITION. Stop and Remove of a container this
 * cridock created, started or listed go to Docker at once; of any other id,
 * after the inspect that finds it (a sandbox's id is left alone).
 * dockerd is a fake recording calls; so is the log writer.
 */
import t from "tap";
import { ContainerManager } from "../../../../src/runtime/container/manager.ts";
import { DockerError } from "../../../../src/docker/errors.ts";
import { CridockError } from "../../../../src/errors.ts";
import { createLogger } from "../../../../src/log.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { LogFollowers } from "../../../../src/logs/followers.ts";
import type { ContainerManagerOptions } from "../../../../src/runtime/container/manager.ts";

const log = createLogger("silent" as never);
const CONTAINER = "c".repeat(64);
const SANDBOX = "5".repeat(64);

function labelsOf(id: string) {
  return id === SANDBOX
    ? { "io.kubernetes.docker.type": "podsandbox" }
    : { "io.kubernetes.docker.type": "container", "io.kubernetes.container.logpath": "/var/log/pods/x/c/0.log" };
}

function setup(status = "created") {
  const calls: string[] = [];
  const docker = {
    // The client's event-checked inspect (ContainerStatus) is the same inspect here.
    inspectContainerCached: (id: string) => docker.inspectContainer(id),
    events: { announce: () => undefined },
    inspectContainer: async (id: string) => {
      calls.push(`inspect ${id.slice(0, 4)}`);
      if (id !== CONTAINER && id !== SANDBOX) throw new DockerError(404, `No such container: ${id}`, "docker GET inspect");
      return {
        Id: id,
        Name: "/k8s_c_p_ns_uid_0",
        State: { Status: status, ExitCode: 0, Running: status === "running", Pid: 0 },
        Config: { Labels: labelsOf(id), Tty: false },
        HostConfig: { LogConfig: { Type: "json-file" } },
      };
    },
    listContainers: async (filters: { id?: string[]; label?: string[] }) => {
      calls.push("list");
      return [CONTAINER, SANDBOX]
        .filter((id) => !filters.id || filters.id.some((p) => id.startsWith(p)))
        .filter((id) => !filters.label?.includes("io.kubernetes.docker.type=container") || id === CONTAINER)
        .map((Id) => ({ Id, Labels: labelsOf(Id), State: status, Names: ["/k8s_c_p_ns_uid_0"], Image: "busybox", ImageID: "sha256:1", Created: 1 }));
    },
    startContainer: async (id: string) => void calls.push(`start ${id.slice(0, 4)}`),
    stopContainer: async (id: string) => void calls.push(`stop ${id.slice(0, 4)}`),
    removeContainer: async (id: string) => {
      calls.push(`remove ${id.slice(0, 4)}`);
      if (id !== CONTAINER && id !== SANDBOX) throw new DockerError(404, `No such container: ${id}`, "docker DELETE");
    },
  } as unknown as DockerClient;
  const logs = {
    start: async (id: string) => void calls.push(`logs ${id.slice(0, 4)}`),
    forget: async (id: string) => void calls.push(`forget ${id.slice(0, 4)}`),
  } as unknown as LogFollowers;
  const manager = new ContainerManager({
    docker,
    logs,
    log,
    sandboxes: {} as ContainerManagerOptions["sandboxes"],
    images: {} as ContainerManagerOptions["images"],
    files: {} as ContainerManagerOptions["files"],
    logMaxSize: "10m",
    logMaxFile: 3,
  });
  return { manager, calls };
}

t.test("a full id: one inspect, the start, the log writer", async (t) => {
  const { manager, calls } = setup();
  await manager.start(CONTAINER);
  t.same(calls, ["inspect cccc", "start cccc", "logs cccc"]);
});

t.test("an id prefix: the list that resolves it, then one inspect", async (t) => {
  const { manager, calls } = setup();
  await manager.start("ccc");
  t.same(calls, ["list", "inspect cccc", "start cccc", "logs cccc"]);
});

t.test("unknown ids and sandboxes are NOT_FOUND, and nothing is started", async (t) => {
  for (const id of ["d".repeat(64), SANDBOX, "ddd"]) {
    const { manager, calls } = setup();
    await t.rejects(manager.start(id), new CridockError("NOT_FOUND", `container ${id} does not exist`), id.slice(0, 8));
    t.notOk(calls.some((c) => c.startsWith("start")), "no start");
  }
});

t.test("a container that ran already is FAILED_PRECONDITION", async (t) => {
  const { manager, calls } = setup("exited");
  await t.rejects(manager.start(CONTAINER), { code: "FAILED_PRECONDITION" });
  t.same(calls, ["inspect cccc"]);
});

t.test("stop and remove of a container this cridock started or listed: no inspect first", async (t) => {
  const started = setup();
  await started.manager.start(CONTAINER);
  started.calls.length = 0;
  await started.manager.stop(CONTAINER, 0);
  await started.manager.remove(CONTAINER);
  t.same(started.calls, ["stop cccc", "remove cccc", "forget cccc"], "after StartContainer");
  const listed = setup("running");
  await listed.manager.list({ id: "", sandboxId: "", labelSelector: {} });
  listed.calls.length = 0;
  await listed.manager.stop(CONTAINER, 0);
  await listed.manager.remove(CONTAINER);
  t.same(listed.calls, ["stop cccc", "remove cccc", "forget cccc"], "after ListContainers");
  // Removed: known no more, so a second remove looks first (and finds nothing).
  listed.calls.length = 0;
  await listed.manager.remove(CONTAINER.replace(/c$/, "d"));
  t.same(listed.calls, ["inspect cccc", "forget cccc"], "an id never seen is inspected; gone, only its log state is dropped");
});

t.test("stop and remove of other ids inspect first; a sandbox's id is left alone", async (t) => {
  const { manager, calls } = setup("running");
  await manager.stop(CONTAINER, 0);
  await manager.remove(CONTAINER);
  t.same(calls, ["inspect cccc", "stop cccc", "inspect cccc", "remove cccc", "forget cccc"]);
  calls.length = 0;
  await manager.stop(SANDBOX, 0);
  await manager.remove(SANDBOX);
  t.same(calls, ["inspect 5555", "inspect 5555", "forget 5555"], "a sandbox is neither stopped nor removed through the container RPCs");
});
