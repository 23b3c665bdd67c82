/**
 * CheckpointContainer's domain (runtime/container/checkpoint.ts and
 * checkpoint-request.ts) against a fake dockerd: the request's checks, the
 * codes of each refusal and failure (UNIMPLEMENTED without --experimental,
 * FAILED_PRECONDITION for a stopped container and for a host-network pod
 * CRIU could not dump, DEADLINE_EXCEEDED), config.dump and spec.dump from
 * what Docker says, and the dump directory removed whatever happened.
 */
import t from "tap";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { extract } from "tar-stream";
import { DockerError } from "../../../../src/docker/errors.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { CheckpointCreateBody, ContainerChange, ContainerInspect } from "../../../../src/docker/types.ts";
import { CridockError } from "../../../../src/errors.ts";
import { codeOf } from "../../../helpers/rejection.ts";
import { silentLogger } from "../../../../src/log.ts";
import { ContainerCheckpointer, NOT_EXPERIMENTAL, criuLogExcerpt } from "../../../../src/runtime/container/checkpoint.ts";
import { checkedLocation, checkpointDeadlineMs } from "../../../../src/runtime/container/checkpoint-request.ts";
import type { SandboxView } from "../../../../src/runtime/sandbox/view.ts";

const ID = "a".repeat(64);
const SANDBOX_ID = "b".repeat(64);
const IMAGE_ID = `sha256:${"c".repeat(64)}`;

async function scratch(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-ckpt-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function inspect(overrides: Partial<ContainerInspect> = {}, state: Partial<ContainerInspect["State"]> = {}): ContainerInspect {
  return {
    Id: ID,
    Created: "2026-11-28T04:00:00.123456789Z",
    Path: "sh",
    Args: ["-c", "count"],
    State: { Status: "running", Running: true, Paused: false, Restarting: false, OOMKilled: false, Dead: false, Pid: 42, ExitCode: 0, Error: "", StartedAt: "", FinishedAt: "", ...state },
    Image: IMAGE_ID,
    ResolvConfPath: "",
    HostnamePath: "",
    HostsPath: "",
    LogPath: "",
    Name: "/k8s_count_web_default_uid-1_0",
    RestartCount: 0,
    Driver: "overlay2",
    HostConfig: { NetworkMode: `container:${SANDBOX_ID}` },
    Mounts: [{ Type: "bind", Source: "/var/lib/kubelet/pods/uid-1/volumes/data", Destination: "/data", RW: true }],
    Config: {
      Image: IMAGE_ID,
      Env: ["PATH=/bin"],
      Labels: {
        "io.kubernetes.docker.type": "container",
        "io.kubernetes.sandbox.id": SANDBOX_ID,
        "io.cridock.image": "busybox:1.36",
        "io.cridock.name": "count",
        "annotation.io.kubernetes.container.hash": "1234",
      },
    },
    NetworkSettings: {},
    ...overrides,
  };
}

const sandboxes = (hostNetwork = false) => ({
  view: async (id: string): Promise<SandboxView> => {
    if (id !== SANDBOX_ID) throw new CridockError("NOT_FOUND", `sandbox ${id} does not exist`);
    return { id, metadata: { name: "web", namespace: "default", uid: "uid-1", attempt: 0 }, hostNetwork } as SandboxView;
  },
});

interface FakeDocker {
  experimental?: boolean;
  dump?: (body: CheckpointCreateBody, signal?: AbortSignal) => Promise<void>;
  changes?: ContainerChange[];
  dumps: CheckpointCreateBody[];
}

/** CRIU's images, as Docker leaves them in CheckpointDir/CheckpointID. */
async function writeImages(body: CheckpointCreateBody): Promise<void> {
  const dir = join(body.CheckpointDir!, body.CheckpointID);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "inventory.img"), "inventory");
  await writeFile(join(dir, "pages-1.img"), Buffer.alloc(4096, 1));
}

function fakeDocker(fake: FakeDocker): DockerClient {
  return {
    info: async () => ({ ExperimentalBuild: fake.experimental ?? true }),
    createCheckpoint: async (_id: string, body: CheckpointCreateBody, signal?: AbortSignal) => {
      fake.dumps.push(body);
      await (fake.dump ?? writeImages)(body, signal);
    },
    containerChanges: async () => fake.changes ?? [],
    inspectImage: async () => ({ RepoTags: ["127.0.0.1:5000/busybox:1.36"] }),
    containerPathStat: async () => ({ name: "x", size: 1, mode: 0o644, mtime: "", linkTarget: "" }),
    containerArchive: async () => {
      throw new DockerError(404, "no such file", "archive");
    },
  } as unknown as DockerClient;
}

async function checkpointer(t: { teardown(fn: () => unknown): void }, fake: FakeDocker, hostNetwork = false) {
  const root = await scratch(t);
  const bundles = join(root, "bundles");
  return {
    root,
    bundles,
    checkpointer: new ContainerCheckpointer({
      docker: fakeDocker(fake),
      sandboxes: sandboxes(hostNetwork),
      log: silentLogger,
      rootDirectory: root,
      bundleDirectories: [bundles],
    }),
  };
}

async function members(path: string): Promise<Record<string, Buffer>> {
  const reader = extract();
  Readable.from([await readFile(path)]).pipe(reader as unknown as NodeJS.WritableStream);
  const out: Record<string, Buffer> = {};
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    out[entry.header.name] = Buffer.concat(chunks);
  }
  return out;
}

t.test("the location: absolute, no NUL, in a directory that exists, not a directory", async (t) => {
  const dir = await scratch(t);
  t.equal(await checkedLocation(join(dir, "a", "..", "c.tar")), join(dir, "c.tar"), "normalized");
  for (const [location, reason] of [
    ["", /location is required/],
    ["relative/c.tar", /"relative\/c.tar" is not an absolute path/],
    [`${dir}/c\0.tar`, /contains a NUL byte/],
    [`${dir}/`, /names a directory/],
    [dir, /is a directory, not an archive file/],
    [join(dir, "missing", "c.tar"), new RegExp(`its directory ${join(dir, "missing")} does not exist`)],
  ] as const) {
    const refused = await codeOf(checkedLocation(location));
    t.equal(refused.code, "INVALID_ARGUMENT", JSON.stringify(location));
    t.match(refused.message, reason);
  }
  await writeFile(join(dir, "file"), "");
  t.match(await codeOf(checkedLocation(join(dir, "file", "c.tar"))), { code: "INVALID_ARGUMENT", message: /is not a directory/ });
});

t.test("the deadline: the request's seconds, else cridock's request timeout", async (t) => {
  t.equal(checkpointDeadlineMs(0n, 120_000), 120_000, "0 is kubelet's default: cridock's --runtime-request-timeout");
  t.equal(checkpointDeadlineMs(undefined, 0), 0);
  t.equal(checkpointDeadlineMs(30n, 120_000), 30_000);
  t.equal(checkpointDeadlineMs(2n ** 62n, 0), 365 * 24 * 3600 * 1000, "capped at a year");
  t.throws(() => checkpointDeadlineMs(-1n, 0), { code: "INVALID_ARGUMENT" });
});

t.test("a running container: the archive holds the dump, config.dump and spec.dump; the dump directory is gone", async (t) => {
  const fake: FakeDocker = { dumps: [], changes: [{ Path: "/etc/passwd-", Kind: 2 }, { Path: "/data/x", Kind: 1 }] };
  const { root, bundles, checkpointer: c } = await checkpointer(t, fake);
  const location = join(root, "checkpoint-web_default-count-2026.tar");
  const result = await c.checkpoint(inspect(), location, 60_000, new AbortController().signal);
  t.match(result, { location, copied: 0, deleted: 1 });
  t.equal(fake.dumps.length, 1);
  t.match(fake.dumps[0], { CheckpointID: "criu", Exit: false }, "the container runs on");
  t.ok(fake.dumps[0]!.CheckpointDir!.startsWith(join(root, "checkpoint-work")), "dumped into cridock's root directory");
  t.same(await readdir(join(root, "checkpoint-work")), [], "the dump directory is removed");
  const m = await members(location);
  t.same(Object.keys(m), ["config.dump", "spec.dump", "checkpoint/", "checkpoint/inventory.img", "checkpoint/pages-1.img", "deleted.files"], "/data is a mount: nothing of it is copied");
  const config = JSON.parse(m["config.dump"]!.toString());
  t.match(config, {
    id: ID,
    name: "k8s_count_web_default_uid-1_0",
    rootfsImage: "busybox:1.36",
    rootfsImageRef: IMAGE_ID,
    rootfsImageName: "127.0.0.1:5000/busybox:1.36",
    runtime: "runc",
    createdTime: "2026-11-28T04:00:00.123456789Z",
    restoredTime: "0001-01-01T00:00:00Z",
    restored: false,
  });
  t.ok(Date.parse(config.checkpointedTime) > Date.now() - 60_000, "checkpointedTime is now");
  const spec = JSON.parse(m["spec.dump"]!.toString());
  t.match(spec.annotations, {
    "io.kubernetes.cri.container-name": "count",
    "io.kubernetes.cri.sandbox-name": "web",
    "io.kubernetes.cri.sandbox-namespace": "default",
    "io.kubernetes.cri.sandbox-uid": "uid-1",
    "io.kubernetes.cri.sandbox-id": SANDBOX_ID,
    "io.kubernetes.pod.name": "web",
    "io.kubernetes.container.hash": "1234",
  });
  t.same(spec.process.args, ["sh", "-c", "count"], "built from the inspect when no bundle is readable");
  t.same(JSON.parse(m["deleted.files"]!.toString()), ["/etc/passwd-"]);

  // With containerd's bundle: Docker's own spec, the CRI annotations laid over it.
  await mkdir(join(bundles, ID), { recursive: true });
  await writeFile(join(bundles, ID, "config.json"), JSON.stringify({ ociVersion: "1.0.2-dev", process: { args: ["from-bundle"] }, annotations: { "org.example": "kept" } }));
  await c.checkpoint(inspect(), location, 60_000, new AbortController().signal);
  const again = JSON.parse((await members(location))["spec.dump"]!.toString());
  t.same(again.process.args, ["from-bundle"]);
  t.match(again.annotations, { "org.example": "kept", "io.kubernetes.cri.container-name": "count" });
});

t.test("refusals: a stopped container, dockerd without --experimental", async (t) => {
  const fake: FakeDocker = { dumps: [] };
  const { root, checkpointer: c } = await checkpointer(t, fake);
  const location = join(root, "c.tar");
  const stopped = await codeOf(c.checkpoint(inspect({}, { Status: "exited", Running: false }), location, 0, new AbortController().signal));
  t.equal(stopped.code, "FAILED_PRECONDITION");
  t.match(stopped.message, /it is exited; only a running container can be checkpointed/);
  fake.experimental = false;
  const plain = await codeOf(c.checkpoint(inspect(), location, 0, new AbortController().signal));
  t.equal(plain.code, "UNIMPLEMENTED");
  t.match(plain.message, NOT_EXPERIMENTAL);
  t.equal(fake.dumps.length, 0, "nothing was dumped");
  t.same((await readdir(root)).filter((n) => n !== "checkpoint-work"), [], "nothing at the location");
});

t.test("Docker's failures keep their cause; a host-network pod is named as the reason", async (t) => {
  const criu = "Cannot checkpoint container k8s_count: rpc error: code = Unknown desc = criu failed: type NOTIFY errno 0";
  const fake: FakeDocker = {
    dumps: [],
    dump: async (body) => {
      await writeImages(body); // half a dump, then the failure
      throw new DockerError(500, criu, "docker POST /containers/x/checkpoints");
    },
  };
  for (const hostNetwork of [false, true]) {
    const { root, checkpointer: c } = await checkpointer(t, fake, hostNetwork);
    const location = join(root, "c.tar");
    const failed = await codeOf(c.checkpoint(inspect(), location, 0, new AbortController().signal));
    t.match(failed.message, criu, "Docker's message is kept");
    if (hostNetwork) {
      t.equal(failed.code, "FAILED_PRECONDITION");
      t.match(failed.message, /its pod uses the host's network namespace/);
    } else {
      t.equal(failed.code, "UNKNOWN");
      t.match(failed.message, /failed in Docker \(CRIU\)/);
    }
    t.same(await readdir(join(root, "checkpoint-work")), [], "the half dump is removed");
    t.same((await readdir(root)).filter((n) => n !== "checkpoint-work" && n !== "bundles"), [], "nothing at the location");
  }
  fake.dump = async () => {
    throw new DockerError(501, "This experimental feature is disabled by default.", "docker POST");
  };
  const { checkpointer: c, root } = await checkpointer(t, fake);
  t.equal((await codeOf(c.checkpoint(inspect(), join(root, "c.tar"), 0, new AbortController().signal))).code, "UNIMPLEMENTED", "a 501 from a daemon restarted meanwhile");
});

t.test("the deadline: DEADLINE_EXCEEDED, and nothing left behind", async (t) => {
  const fake: FakeDocker = {
    dumps: [],
    dump: (body, signal) =>
      new Promise((_, reject) => {
        void writeImages(body);
        signal?.addEventListener("abort", () => reject(new CridockError("CANCELLED", "docker POST: cancelled by the caller")));
      }),
  };
  const { root, checkpointer: c } = await checkpointer(t, fake);
  // AbortSignal.timeout's timer keeps no process alive (cridock's server does): this one does, for the test.
  const alive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(alive));
  const late = await codeOf(c.checkpoint(inspect(), join(root, "c.tar"), 200, new AbortController().signal));
  t.equal(late.code, "DEADLINE_EXCEEDED");
  t.match(late.message, /did not finish within 0.2 s/);
  t.same(await readdir(join(root, "checkpoint-work")), []);
  t.same((await readdir(root)).sort(), ["checkpoint-work"]);

  const caller = new AbortController();
  const pending = c.checkpoint(inspect(), join(root, "c.tar"), 0, caller.signal);
  setTimeout(() => caller.abort(new CridockError("CANCELLED", "CheckpointContainer: cancelled by the client")), 50);
  t.match(await codeOf(pending), { code: "CANCELLED", message: /cancelled by the client/ }, "the client's cancellation is the client's");
});

t.test("CRIU's log: its last error lines join Docker's message", async (t) => {
  const dir = await scratch(t);
  const log = join(dir, "criu-dump.log");
  await writeFile(log, "(00.01) Dumping\n(00.02) Error (criu/sk-inet.c:99): inet: Can't dump\n(00.03) Error (criu/cr-dump.c:1): Dumping FAILED.\n");
  t.equal(
    await criuLogExcerpt(`criu failed: type NOTIFY errno 0 path= ${log}: unknown`),
    `; CRIU's log ${log} ends with: (00.02) Error (criu/sk-inet.c:99): inet: Can't dump | (00.03) Error (criu/cr-dump.c:1): Dumping FAILED.`,
  );
  t.equal(await criuLogExcerpt("no log named"), "");
  t.match(await criuLogExcerpt(`see ${join(dir, "gone.log")}`), /could not be read/);
});
