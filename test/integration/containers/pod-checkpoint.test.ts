/**
 * CheckpointPod and RestorePod against this host's dockerd, which runs
 * without --experimental (and where CRIU cannot work: the real checkpoint
 * and restore of a pod are in test/vm-lifecycle/pod-checkpoint.test.ts, on
 * the cgroup v2 node): a pod of two running containers is UNIMPLEMENTED
 * saying why, and both run on, not paused; every bad request is refused
 * with its code before anything is paused (an option key, a relative,
 * unclean or symlinked output path, another pod's container, a stopped
 * one, an unknown pod); RestorePod refuses a missing or symlinked archive
 * and, without experimental mode, creates no sandbox. Nothing is left at
 * the output paths or in cridock's work directory.
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, waitExited } from "./harness.ts";

const experimental = execFileSync("docker", ["info", "--format", "{{.ExperimentalBuild}}"]).toString().trim() === "true";
const h = await startHarness();
t.teardown(() => h.close());
const archives = await mkdtemp(join(tmpdir(), "cridock-pod-checkpoints-"));
t.teardown(() => rm(archives, { recursive: true, force: true }));
await mkdir(join(archives, "real"));
await symlink(join(archives, "real"), join(archives, "link"));

const pod = await runPod(h);
const other = await runPod(h);
const loop = (name: string) => containerConfig(name, ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i; sleep 0.2; done"]);
const count = await createContainer(h, pod, loop("count"));
const side = await createContainer(h, pod, loop("side"));
const foreign = await createContainer(h, other, loop("foreign"));
for (const id of [count, side, foreign]) await h.client.call("StartContainer", { containerId: id });

async function refusal(method: string, request: object): Promise<{ code: number; details: string }> {
  try {
    await h.client.call(method, request, { timeoutMs: 60_000 });
  } catch (err) {
    return err as { code: number; details: string };
  }
  throw new Error(`${method} succeeded: ${JSON.stringify(request)}`);
}

/** Files at the output paths, and what cridock's work directory holds. */
async function leftovers(): Promise<string[]> {
  const work = await readdir(join(h.cridock.rootDirectory, "checkpoint-work")).catch(() => [] as string[]);
  return [...(await readdir(join(archives, "real"))), ...work.map((w) => `checkpoint-work/${w}`)];
}

/** Docker's state of each container: running, and not paused. */
function states(ids: string[]): string[] {
  return ids.map((id) => execFileSync("docker", ["inspect", "--format", "{{.State.Status}} paused={{.State.Paused}}", id]).toString().trim());
}

t.test("dockerd without --experimental: UNIMPLEMENTED, saying so; both containers run on, not paused", { skip: experimental && "this dockerd runs with --experimental" }, async (t) => {
  const err = await refusal("CheckpointPod", { podSandboxId: pod.podSandboxId, outputPath: join(archives, "real", "pod.tar") });
  t.equal(err.code, grpcStatus.UNIMPLEMENTED);
  t.match(err.details, /cannot checkpoint pod cridock-test\/\S+: dockerd runs without --experimental; Docker serves checkpoints only in experimental mode/);
  const named = await refusal("CheckpointPod", { podSandboxId: pod.podSandboxId.slice(0, 12), outputPath: join(archives, "real", "pod.tar"), containerIds: [count.slice(0, 12)] });
  t.equal(named.code, grpcStatus.UNIMPLEMENTED, "id prefixes name the pod and the container as in every RPC");
  t.same(states([count, side]), ["running paused=false", "running paused=false"]);
  t.same(await leftovers(), []);
});

t.test("refused before anything is paused, with the code that says why", async (t) => {
  const out = join(archives, "real", "pod.tar");
  const cases: [object, number, RegExp][] = [
    [{ podSandboxId: pod.podSandboxId, outputPath: out, options: { "leave-running": "true" } }, grpcStatus.INVALID_ARGUMENT, /unknown option "leave-running"; cridock takes no options for it/],
    [{ podSandboxId: pod.podSandboxId, outputPath: "pod.tar" }, grpcStatus.INVALID_ARGUMENT, /output_path "pod.tar" is not a clean path|is not an absolute path/],
    [{ podSandboxId: pod.podSandboxId, outputPath: `${archives}/real/../real/pod.tar` }, grpcStatus.INVALID_ARGUMENT, /is not a clean path/],
    [{ podSandboxId: pod.podSandboxId, outputPath: join(archives, "link", "pod.tar") }, grpcStatus.INVALID_ARGUMENT, /goes through a symbolic link/],
    [{ podSandboxId: pod.podSandboxId, outputPath: join(archives, "real") }, grpcStatus.INVALID_ARGUMENT, /is a directory/],
    [{ podSandboxId: pod.podSandboxId, outputPath: out, containerIds: [foreign] }, grpcStatus.INVALID_ARGUMENT, new RegExp(`container ${foreign} is not a container of pod sandbox ${pod.podSandboxId}`)],
    [{ podSandboxId: pod.podSandboxId, outputPath: out, containerIds: [count, count] }, grpcStatus.INVALID_ARGUMENT, /names container \w+ twice/],
    [{ podSandboxId: pod.podSandboxId, outputPath: out, containerIds: ["not-an-id"] }, grpcStatus.INVALID_ARGUMENT, /not a hexadecimal container id/],
    [{ podSandboxId: "f".repeat(64), outputPath: out }, grpcStatus.NOT_FOUND, /pod sandbox f{64} does not exist/],
    [{ podSandboxId: pod.podSandboxId, outputPath: out, containerIds: ["0".repeat(64)] }, grpcStatus.NOT_FOUND, /does not exist/],
  ];
  for (const [request, code, details] of cases) {
    const err = await refusal("CheckpointPod", request);
    t.equal(err.code, code, JSON.stringify(request));
    t.match(err.details, details);
  }
  const done = await createContainer(h, pod, containerConfig("done", ["true"]));
  await h.client.call("StartContainer", { containerId: done });
  await waitExited(h, done);
  const stopped = await refusal("CheckpointPod", { podSandboxId: pod.podSandboxId, outputPath: out, containerIds: [done] });
  t.equal(stopped.code, grpcStatus.FAILED_PRECONDITION, "an exited container");
  t.match(stopped.details, /is exited; only running containers can be checkpointed/);
  await h.client.call("RemoveContainer", { containerId: done });
  t.same(states([count, side, foreign]), ["running paused=false", "running paused=false", "running paused=false"], "nothing paused");
  t.same(await leftovers(), []);
});

t.test("RestorePod: a missing or symlinked archive refused; without experimental mode no sandbox is made", async (t) => {
  const before = (await h.client.call("ListPodSandbox", {})).items.length;
  t.match(await refusal("RestorePod", { checkpointPath: join(archives, "real", "none.tar") }), { code: grpcStatus.NOT_FOUND, details: /does not exist/ });
  await writeFile(join(archives, "file.tar"), "not a pod checkpoint");
  await symlink(join(archives, "file.tar"), join(archives, "real", "linked.tar"));
  t.match(await refusal("RestorePod", { checkpointPath: join(archives, "real", "linked.tar") }), { code: grpcStatus.INVALID_ARGUMENT, details: /is not a regular file \(a symbolic link\)/ });
  await rm(join(archives, "real", "linked.tar"));
  t.match(await refusal("RestorePod", { checkpointPath: join(archives, "file.tar"), options: { x: "1" } }), { code: grpcStatus.INVALID_ARGUMENT, details: /unknown option "x"/ });
  if (!experimental) {
    const err = await refusal("RestorePod", { checkpointPath: join(archives, "file.tar") });
    t.equal(err.code, grpcStatus.UNIMPLEMENTED);
    t.match(err.details, /dockerd runs without --experimental/);
  }
  t.equal((await h.client.call("ListPodSandbox", {})).items.length, before, "no sandbox made");
  t.same(await leftovers(), []);
});

t.test("the pods go, and nothing of theirs is left", async (t) => {
  await removePod(h, pod.podSandboxId);
  await removePod(h, other.podSandboxId);
  t.same(await leakedContainers(h), []);
});
