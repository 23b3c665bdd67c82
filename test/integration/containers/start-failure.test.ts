/**
 * A container Docker could not start (command missing or not executable)
 * stays "created" in Docker with State.Error and an exit code. Through CRI
 * it is an exited attempt, as dockershim reported it: EXITED in
 * ContainerStatus and in ListContainers (kubelet's relist), reason
 * ContainerCannotRun, Docker's exit code and error, and a finished_at that
 * kubelet's restart backoff can count from. With the state CREATED and
 * finished_at 0, kubelet recreated such a container ~50 times a minute.
 */
import t from "tap";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { containerConfig, createContainer, leakedContainers, runPod, startHarness, status } from "./harness.ts";

const CREATED = 0;
const EXITED = 2;

const h = await startHarness();
t.teardown(() => h.close());
const pod = await runPod(h);

async function listedState(client: typeof h.client, id: string, state?: number): Promise<number | undefined> {
  const filter = state === undefined ? {} : { filter: { state: { state } } };
  const containers = (await client.call("ListContainers", filter)).containers as { id: string; state: number }[];
  return containers.find((c) => c.id === id)?.state;
}

const failures: Record<string, string> = {};

for (const [name, command, codes, message] of [
  ["missing", ["/no/such/binary"], [127], /no such file|not found/],
  ["not-executable", ["/etc/passwd"], [126], /permission denied/i],
] as const) {
  t.test(`start fails (${name}): an exited attempt with Docker's code and error`, async (t) => {
    const id = await createContainer(h, pod, containerConfig(name, [...command]));
    failures[name] = id;
    t.equal(await listedState(h.client, id), CREATED, "listed CREATED before the start");
    await t.rejects(h.client.call("StartContainer", { containerId: id }));
    const s = await status(h, id);
    t.equal(s.state, EXITED);
    t.equal(s.reason, "ContainerCannotRun");
    t.ok(([...codes, 128] as number[]).includes(s.exitCode), `exit code ${s.exitCode}`);
    t.match(s.message, message);
    t.ok(s.createdAt > 0n);
    t.equal(s.finishedAt, s.createdAt, "finished_at is set (kubelet backs off from it)");
    t.equal(s.startedAt, s.createdAt);
    t.equal(await listedState(h.client, id), EXITED, "ListContainers agrees");
    t.equal(await listedState(h.client, id, EXITED), EXITED, "the EXITED filter finds it");
    t.equal(await listedState(h.client, id, CREATED), undefined, "the CREATED filter does not");
    await t.rejects(h.client.call("StartContainer", { containerId: id }), "it cannot be started again");
  });
}

t.test("a container only created (not started) stays CREATED", async (t) => {
  const id = await createContainer(h, pod, containerConfig("waiting", ["sleep", "3600"]));
  t.equal((await status(h, id)).state, CREATED);
  t.equal(await listedState(h.client, id, CREATED), CREATED);
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("a restarted cridock learns the failure from Docker", async (t) => {
  // kill keeps the socket and root directory for the restart (stop would remove them).
  await h.cridock.kill();
  const again = await startCridockProcess({ socketPath: h.cridock.socketPath, rootDirectory: h.cridock.rootDirectory, flags: h.cridockFlags });
  t.teardown(() => again.stop());
  for (const id of Object.values(failures)) {
    t.equal(await listedState(again.client, id), EXITED);
    t.equal((await again.client.call("ContainerStatus", { containerId: id })).status.reason, "ContainerCannotRun");
  }
  await again.client.call("StopPodSandbox", { podSandboxId: pod.podSandboxId });
  await again.client.call("RemovePodSandbox", { podSandboxId: pod.podSandboxId });
  t.same(await leakedContainers(h), []);
});
