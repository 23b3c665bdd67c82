/**
 * CheckpointPod's and RestorePod's steps (runtime/pod-checkpoint/
 * checkpoint.ts, restore.ts) against fakes of dockerd, the sandboxes and
 * the single-container checkpoint and create: every selected container is
 * paused before the first is checkpointed and resumed on every path (a
 * failed checkpoint, the deadline passing in the middle); nothing is left
 * at output_path or in the work directory after a failure; a container of
 * another pod or a stopped one is refused before anything is paused; a
 * restore that fails at its second container removes the first and the
 * sandbox.
 */
import t from "tap";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DockerClient } from "../../../../src/docker/client.ts";
import { DockerError } from "../../../../src/docker/errors.ts";
import type { ContainerInspect } from "../../../../src/docker/types.ts";
import { CridockError, deadlineExceeded, invalidArgument } from "../../../../src/errors.ts";
import { silentLogger } from "../../../../src/log.ts";
import { PodCheckpointer } from "../../../../src/runtime/pod-checkpoint/checkpoint.ts";
import { PodRestorer } from "../../../../src/runtime/pod-checkpoint/restore.ts";
import type { ContainerSpec } from "../../../../src/runtime/container/spec.ts";
import type { SandboxSpec } from "../../../../src/runtime/sandbox/spec.ts";
import { codeOf } from "../../../helpers/rejection.ts";
import { sandboxSpec } from "./fixtures.ts";

const SANDBOX = "5".repeat(64);
const OTHER_SANDBOX = "6".repeat(64);
const A = "a".repeat(64);
const B = "b".repeat(64);

async function scratch(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-podflow-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function inspect(id: string, name: string, sandbox = SANDBOX, status = "running"): ContainerInspect {
  return {
    Id: id,
    Name: `/k8s_${name}_web_default_uid-1_0`,
    Image: `sha256:${"c".repeat(64)}`,
    State: { Status: status, Running: status === "running", Paused: false, Pid: 1, ExitCode: 0, StartedAt: "", FinishedAt: "" },
    HostConfig: {},
    Config: {
      Env: ["PATH=/bin"],
      Cmd: ["sh"],
      Labels: {
        "io.kubernetes.docker.type": "container",
        "io.kubernetes.sandbox.id": sandbox,
        "io.cridock.name": name,
        "io.cridock.attempt": "0",
        "io.kubernetes.container.logpath": `/var/log/pods/default_web_uid-1/${name}/0.log`,
      },
    },
  } as unknown as ContainerInspect;
}

interface World {
  containers: Map<string, ContainerInspect>;
  /** Calls in order: pause/unpause/checkpoint with the id's first letter. */
  calls: string[];
  experimental: boolean;
  unpauseFailures: number;
}

function world(): World {
  return { containers: new Map([[A, inspect(A, "count")], [B, inspect(B, "side")]]), calls: [], experimental: true, unpauseFailures: 0 };
}

function fakeDocker(w: World): DockerClient {
  return {
    info: async () => ({ ExperimentalBuild: w.experimental }),
    listContainers: async () => [...w.containers.values()].filter((c) => c.Config.Labels?.["io.kubernetes.sandbox.id"] === SANDBOX).map((c) => ({ Id: c.Id, State: c.State.Status })),
    inspectContainer: async (id: string) => {
      const c = w.containers.get(id);
      if (!c) throw new DockerError(404, `No such container: ${id}`, "inspect");
      return c;
    },
    pauseContainer: async (id: string) => {
      w.calls.push(`pause ${id[0]}`);
      w.containers.get(id)!.State.Paused = true;
    },
    unpauseContainer: async (id: string) => {
      if (w.unpauseFailures-- > 0) throw new DockerError(409, "container is being checkpointed", "unpause");
      w.calls.push(`unpause ${id[0]}`);
      w.containers.get(id)!.State.Paused = false;
    },
  } as unknown as DockerClient;
}

function checkpointer(root: string, w: World, checkpoint: (id: string, location: string) => Promise<void> = (_id, l) => writeFile(l, "archive")) {
  return new PodCheckpointer({
    docker: fakeDocker(w),
    sandboxes: { resolve: async (id) => (SANDBOX.startsWith(id) ? { id: SANDBOX, record: { spec: sandboxSpec() } as never } : undefined) },
    containers: {
      checkpoint: async (id, location) => {
        w.calls.push(`checkpoint ${id[0]}`);
        t.ok(w.containers.get(id)!.State.Paused, "checkpointed while paused");
        await checkpoint(id, location);
      },
    },
    log: silentLogger,
    rootDirectory: root,
  });
}

const request = (outputPath: string, containerIds: string[] = []) => ({ sandboxId: SANDBOX, outputPath, containerIds, options: {} });

t.test("all paused before the first checkpoint, all resumed, one archive", async (t) => {
  const dir = await scratch(t);
  const w = world();
  const result = await checkpointer(dir, w).checkpoint(request(join(dir, "pod.tar")), new AbortController().signal);
  t.same(w.calls.slice(0, 4), ["pause a", "pause b", "checkpoint a", "checkpoint b"]);
  t.same(w.calls.slice(4).sort(), ["unpause a", "unpause b"]);
  t.same(result.containers, [A, B]);
  t.ok(result.bytes > 0);
  t.same((await readdir(dir)).sort(), ["checkpoint-work", "pod.tar"]);
  t.same(await readdir(join(dir, "checkpoint-work")), [], "the work directory is gone");
});

t.test("a failed checkpoint of the second container: all resumed, nothing written", async (t) => {
  const dir = await scratch(t);
  const w = world();
  const err = await codeOf(
    checkpointer(dir, w, async (id, l) => {
      if (id === B) throw new CridockError("UNKNOWN", "checkpointing container bbbbbbbbbbbb failed in Docker (CRIU): dump failed");
      await writeFile(l, "archive");
    }).checkpoint(request(join(dir, "pod.tar")), new AbortController().signal),
  );
  t.match(err, { code: "UNKNOWN", message: /CRIU/ });
  t.same(w.calls.slice(-2).sort(), ["unpause a", "unpause b"]);
  t.same(await readdir(dir), ["checkpoint-work"], "no archive, no temporary file");
  t.same(await readdir(join(dir, "checkpoint-work")), []);
});

t.test("the deadline passes in the middle: the dump in flight ends, all resumed, DEADLINE_EXCEEDED, nothing written", async (t) => {
  const dir = await scratch(t);
  const w = world();
  w.unpauseFailures = 1; // Docker refuses the first resume once: it is tried again
  const controller = new AbortController();
  const err = await codeOf(
    checkpointer(dir, w, async (_id, l) => {
      controller.abort(deadlineExceeded("CheckpointPod: the client's deadline passed"));
      await writeFile(l, "archive");
    }).checkpoint(request(join(dir, "pod.tar")), controller.signal),
  );
  t.match(err, { code: "DEADLINE_EXCEEDED", message: /the deadline passed while checkpointing pod default\/web \(1 of 2 containers done\); every container was resumed and nothing was written/ });
  t.same(w.calls.filter((c) => c.startsWith("checkpoint")), ["checkpoint a"], "the second is not begun");
  t.same(w.calls.filter((c) => c.startsWith("unpause")).sort(), ["unpause a", "unpause b"]);
  t.notOk([...w.containers.values()].some((c) => c.State.Paused), "nothing left paused");
  t.same(await readdir(dir), ["checkpoint-work"]);
});

t.test("refused before anything is paused: another pod's container, a stopped one, an unknown one, options, no experimental mode", async (t) => {
  const dir = await scratch(t);
  const w = world();
  w.containers.set("7".repeat(64), inspect("7".repeat(64), "other", OTHER_SANDBOX));
  w.containers.set("8".repeat(64), inspect("8".repeat(64), "done", SANDBOX, "exited"));
  const out = join(dir, "pod.tar");
  const c = checkpointer(dir, w);
  const signal = new AbortController().signal;
  t.match(await codeOf(c.checkpoint(request(out, ["7".repeat(64)]), signal)), { code: "INVALID_ARGUMENT", message: /is not a container of pod sandbox 5{64}/ });
  t.match(await codeOf(c.checkpoint(request(out, ["8".repeat(64)]), signal)), { code: "FAILED_PRECONDITION", message: /is exited; only running containers can be checkpointed/ });
  t.match(await codeOf(c.checkpoint(request(out, ["9".repeat(64)]), signal)), { code: "NOT_FOUND" });
  t.match(await codeOf(c.checkpoint(request(out, [A, A]), signal)), { code: "INVALID_ARGUMENT", message: /twice/ });
  t.match(await codeOf(c.checkpoint(request(out, ["not-an-id"]), signal)), { code: "INVALID_ARGUMENT" });
  t.match(await codeOf(c.checkpoint({ ...request(out), sandboxId: "f".repeat(64) }, signal)), { code: "NOT_FOUND", message: /pod sandbox f{64} does not exist/ });
  t.match(await codeOf(c.checkpoint({ ...request(out), options: { x: "1" } }, signal)), { code: "INVALID_ARGUMENT", message: /unknown option "x"/ });
  t.match(await codeOf(c.checkpoint(request("relative.tar"), signal)), { code: "INVALID_ARGUMENT" });
  w.experimental = false;
  t.match(await codeOf(c.checkpoint(request(out), signal)), { code: "UNIMPLEMENTED", message: /dockerd runs without --experimental/ });
  t.same(w.calls, [], "nothing paused or checkpointed");
  t.same((await readdir(dir)).filter((n) => n !== "checkpoint-work"), []);
});

t.test("a restore failing at its second container removes the first and the sandbox", async (t) => {
  const dir = await scratch(t);
  const w = world();
  const out = join(dir, "pod.tar");
  await checkpointer(dir, w).checkpoint(request(out), new AbortController().signal);
  const made: string[] = [];
  const removed: string[] = [];
  const restorer = (failAt: string | undefined) =>
    new PodRestorer({
      docker: fakeDocker(w),
      sandboxes: {
        run: async (spec: SandboxSpec) => (made.push(`sandbox ${spec.metadata.name}`), "d".repeat(64)),
        stop: async (id) => void removed.push(`stop ${id[0]}`),
        remove: async (id) => void removed.push(`remove ${id[0]}`),
      },
      containers: {
        create: async (_sandbox, spec: ContainerSpec, options) => {
          t.match(options?.restoreSource, new RegExp(`^container ${spec.name} of pod checkpoint ${out}$`));
          if (spec.name === failAt) throw invalidArgument(`${options?.restoreSource} is not a usable checkpoint archive: it has no checkpoint/inventory.img`);
          made.push(`container ${spec.name}`);
          return spec.name === "count" ? "e".repeat(64) : "f".repeat(64);
        },
        remove: async (id) => void removed.push(`container ${id[0]}`),
      },
      log: silentLogger,
      rootDirectory: dir,
    });
  const ok = await restorer(undefined).restore({ checkpointPath: out, runtimeHandler: "", options: {}, containers: [] }, new AbortController().signal);
  t.same(ok, { sandboxId: "d".repeat(64), containers: [{ name: "count", id: "e".repeat(64) }, { name: "side", id: "f".repeat(64) }] });
  t.same(removed, []);
  made.length = 0;
  const err = await codeOf(restorer("side").restore({ checkpointPath: out, runtimeHandler: "", options: {}, containers: [] }, new AbortController().signal));
  t.match(err, { code: "INVALID_ARGUMENT", message: /container side of pod checkpoint .* has no checkpoint\/inventory\.img/ });
  t.same(made, ["sandbox web", "container count"]);
  t.same(removed, ["container e", "stop d", "remove d"], "the first container, then the sandbox");
  t.same(await readdir(join(dir, "checkpoint-work")), [], "the archive's copies are gone");
  w.experimental = false;
  t.match(await codeOf(restorer(undefined).restore({ checkpointPath: out, runtimeHandler: "", options: {}, containers: [] }, new AbortController().signal)), { code: "UNIMPLEMENTED" });
});
