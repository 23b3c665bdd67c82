/**
 * StartContainer asks dockerd what it must and no more: one inspect of the
 * container (under its lock, which is where its state is judged), its start,
 * and for an id prefix the list that resolves it. Unknown ids and sandboxes
 * are NOT_FOUND; a container that ran already is FAILED_PRECONDITION.
 * dockerd is a fake counting calls; the log writer is a fake recording starts.
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
    listContainers: async (filters: { id?: string[] }) => {
      calls.push("list");
      return [CONTAINER, SANDBOX]
        .filter((id) => filters.id?.some((p) => id.startsWith(p)))
        .map((Id) => ({ Id, Labels: labelsOf(Id), State: status, Names: ["/x"] }));
    },
    startContainer: async (id: string) => void calls.push(`start ${id.slice(0, 4)}`),
  } as unknown as DockerClient;
  const logs = { start: async (id: string) => void calls.push(`logs ${id.slice(0, 4)}`) } as unknown as LogFollowers;
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
