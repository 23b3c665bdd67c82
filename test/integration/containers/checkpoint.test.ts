/**
 * CheckpointContainer against this host's dockerd, which runs without
 * --experimental (and where CRIU cannot work: test/vm-lifecycle/checkpoint.test.ts
 * checkpoints for real on the cgroup v2 node): a running container is
 * UNIMPLEMENTED saying why; an unknown id, a sandbox's id, a bad location and
 * an exited container are refused with their codes before anything is
 * dumped; nothing is left at the location or in cridock's root directory.
 * And the part of the archive that needs no CRIU, rootfs-diff.tar and
 * deleted.files, is built from this dockerd's changes and archives.
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { extract } from "tar-stream";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { BUSYBOX_IMAGE, TEST_DOCKER_ENDPOINT } from "../../helpers/env.ts";
import { DockerClient } from "../../../src/docker/client.ts";
import { silentLogger } from "../../../src/log.ts";
import { addEntry, writeCheckpointArchive, writeTarAtomically } from "../../../src/runtime/container/checkpoint-archive.ts";
import { readCheckpointArchive } from "../../../src/runtime/container/checkpoint-archive-read.ts";
import { ContainerRestorer, RESTORE_CHECKPOINT } from "../../../src/runtime/container/checkpoint-restore.ts";
import { CHECKPOINT_IMAGE_MARKER, CheckpointImages } from "../../../src/runtime/container/checkpoint-image.ts";
import { DockerImageFiles } from "../../../src/runtime/image-files.ts";
import { writeLayerImageArchive } from "../../helpers/checkpoint-image.ts";
import { dockerContainerFiles, packRootfsDiff, planRootfsDiff } from "../../../src/runtime/container/rootfs-diff.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, waitExited } from "./harness.ts";

const experimental = execFileSync("docker", ["info", "--format", "{{.ExperimentalBuild}}"]).toString().trim() === "true";
const h = await startHarness();
t.teardown(() => h.close());
const pod = await runPod(h);
const archives = await mkdtemp(join(tmpdir(), "cridock-checkpoints-"));
t.teardown(() => rm(archives, { recursive: true, force: true }));

const running = await createContainer(h, pod, containerConfig("counter", ["sh", "-c", "i=0; while true; do i=$((i+1)); sleep 1; done"]));
await h.client.call("StartContainer", { containerId: running });

async function refusal(request: object): Promise<{ code: number; details: string }> {
  try {
    await h.client.call("CheckpointContainer", request);
  } catch (err) {
    return err as { code: number; details: string };
  }
  throw new Error(`CheckpointContainer succeeded for ${(request as { containerId?: string }).containerId}`);
}

/** What the refusals may have left: files in the archives' directory, dump directories in cridock's root. */
async function leftovers(): Promise<string[]> {
  const work = await readdir(join(h.cridock.rootDirectory, "checkpoint-work")).catch(() => [] as string[]);
  return [...(await readdir(archives)), ...work.map((w) => `checkpoint-work/${w}`)];
}

t.test("dockerd without --experimental: UNIMPLEMENTED, saying so", { skip: experimental && "this dockerd runs with --experimental" }, async (t) => {
  const location = join(archives, "checkpoint-counter.tar");
  const err = await refusal({ containerId: running, location, timeout: 30n });
  t.equal(err.code, grpcStatus.UNIMPLEMENTED);
  t.match(err.details, "dockerd runs without --experimental; Docker serves checkpoints only in experimental mode");
  t.notMatch(err.details, /does not implement/, "not the generic answer for an RPC cridock lacks");
  const short = await refusal({ containerId: running.slice(0, 12), location, timeout: 0n });
  t.equal(short.code, grpcStatus.UNIMPLEMENTED, "an id prefix names the container as in every RPC");
  t.same(await leftovers(), [], "nothing at the location, no dump directory");
  const state = execFileSync("docker", ["inspect", "--format", "{{.State.Status}}", running]).toString().trim();
  t.equal(state, "running", "the container runs on");
});

t.test("NOT_FOUND: an unknown id, a sandbox's id", async (t) => {
  const location = join(archives, "c.tar");
  for (const containerId of ["0123456789ab", "f".repeat(64), pod.podSandboxId]) {
    const err = await refusal({ containerId, location });
    t.equal(err.code, grpcStatus.NOT_FOUND, containerId);
    t.match(err.details, /does not exist/);
  }
  t.same(await leftovers(), []);
});

t.test("INVALID_ARGUMENT: a bad id or location, named", async (t) => {
  const cases: [object, RegExp][] = [
    [{ containerId: "not-an-id", location: join(archives, "c.tar") }, /not a hexadecimal container id/],
    [{ containerId: "", location: join(archives, "c.tar") }, /id is required/],
    [{ containerId: running, location: "" }, /location is required/],
    [{ containerId: running, location: "checkpoints/c.tar" }, /location "checkpoints\/c.tar" is not an absolute path/],
    [{ containerId: running, location: join(archives, "missing", "c.tar") }, /its directory .*missing does not exist/],
    [{ containerId: running, location: archives }, /is a directory, not an archive file/],
    [{ containerId: running, location: `${archives}/c\0.tar` }, /contains a NUL byte/],
    [{ containerId: running, location: join(archives, "c.tar"), timeout: -5n }, /timeout -5 is negative/],
  ];
  for (const [request, details] of cases) {
    const err = await refusal(request);
    t.equal(err.code, grpcStatus.INVALID_ARGUMENT, JSON.stringify(request, (_key, value: unknown) => (typeof value === "bigint" ? String(value) : value)));
    t.match(err.details, details);
  }
  t.same(await leftovers(), []);
});

t.test("FAILED_PRECONDITION: an exited container", async (t) => {
  const done = await createContainer(h, pod, containerConfig("done", ["true"]));
  await h.client.call("StartContainer", { containerId: done });
  await waitExited(h, done);
  const err = await refusal({ containerId: done, location: join(archives, "done.tar") });
  t.equal(err.code, grpcStatus.FAILED_PRECONDITION);
  t.match(err.details, /it is exited; only a running container can be checkpointed/);
  const created = await createContainer(h, pod, containerConfig("never-started", ["sleep", "60"]));
  t.equal((await refusal({ containerId: created, location: join(archives, "created.tar") })).code, grpcStatus.FAILED_PRECONDITION, "a container never started");
  t.same(await leftovers(), []);
});

t.test("the root filesystem diff, from this dockerd's changes and archives", async (t) => {
  const script = "echo marked >/etc/cridock-marker; mkdir -p /srv/app/sub; echo a >/srv/app/a; echo b >/srv/app/sub/b; ln /srv/app/a /srv/app/hard; rm /etc/group; echo ready; sleep 3600";
  const id = await createContainer(h, pod, containerConfig("changer", ["sh", "-c", script]));
  await h.client.call("StartContainer", { containerId: id });
  const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  t.teardown(() => docker.close());
  const deadline = Date.now() + 30_000;
  let changes = await docker.containerChanges(id);
  while (!changes.some((c) => c.Path === "/etc/group") && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    changes = await docker.containerChanges(id);
  }
  const inspect = await docker.inspectContainer(id);
  const plan = planRootfsDiff(changes, inspect.Mounts.map((m) => m.Destination));
  t.same(plan.deleted, ["/etc/group"]);
  const diff = join(archives, "rootfs-diff.tar");
  let copied = 0;
  await writeTarAtomically(diff, async (pack) => void (copied = await packRootfsDiff(pack, dockerContainerFiles(docker, id), plan)));
  const reader = extract();
  Readable.from([await readFile(diff)]).pipe(reader as unknown as NodeJS.WritableStream);
  const entries: Record<string, { type: string; linkname: string | null; content: string }> = {};
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    entries[entry.header.name] = { type: entry.header.type, linkname: entry.header.linkname ?? null, content: Buffer.concat(chunks).toString() };
  }
  t.equal(copied, 2, "the added file and the added directory (with what is below it); /etc is a modified directory");
  t.match(entries, {
    "etc/cridock-marker": { type: "file", content: "marked\n" },
    "srv/app/": { type: "directory" },
    "srv/app/a": { type: "file", content: "a\n" },
    "srv/app/sub/b": { type: "file", content: "b\n" },
  });
  const hard = entries["srv/app/hard"] ?? entries["srv/app/a"];
  t.ok(entries["srv/app/hard"], "the hard link is in", { names: Object.keys(entries).join(" ") });
  if (hard?.type === "link") t.match(hard.linkname, /^srv\/app\/(a|hard)$/, "a hard link points inside the diff, relative to the root");
  t.notOk(Object.keys(entries).some((n) => n.startsWith("etc/") && n !== "etc/cridock-marker"), "nothing else of /etc");
  await rm(diff);
});

/** A checkpoint archive with stand-ins for CRIU's images (no CRIU here), a diff adding a file and deleting /etc/group. */
async function restoreArchive(imageRef: string): Promise<string> {
  const dir = await mkdtemp(join(archives, "restore-"));
  await mkdir(join(dir, "images"));
  await writeFile(join(dir, "images", "inventory.img"), "inventory");
  await writeFile(join(dir, "images", "pages-1.img"), Buffer.alloc(10_000, 1));
  const diff = join(dir, "diff.tar");
  await writeTarAtomically(diff, (pack) => addEntry(pack, { name: "etc/cridock-restored", mode: 0o644 }, Buffer.from("restored\n")));
  const archive = join(archives, "restore.tar");
  await writeCheckpointArchive(archive, {
    imagesDirectory: join(dir, "images"),
    configDump: { id: "x", name: "k8s_x", rootfsImage: BUSYBOX_IMAGE, rootfsImageRef: imageRef, createdTime: "", checkpointedTime: "", restoredTime: "", restored: false },
    specDump: { ociVersion: "1.0.2" },
    rootfsDiffTar: diff,
    deletedFiles: ["/etc/group"],
  });
  await rm(dir, { recursive: true });
  return archive;
}

t.test("CreateContainer from an archive's path: NOT_FOUND, INVALID_ARGUMENT, UNIMPLEMENTED without --experimental; nothing created", async (t) => {
  const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  t.teardown(() => docker.close());
  const archive = await restoreArchive((await docker.inspectImage(BUSYBOX_IMAGE)).Id);
  const notArchive = join(archives, "not-an-archive.tar");
  await writeFile(notArchive, "plain text");
  const cases: [string, number, RegExp][] = [
    [join(archives, "missing.tar"), grpcStatus.NOT_FOUND, /checkpoint archive .*missing\.tar does not exist/],
    [archives, grpcStatus.INVALID_ARGUMENT, /is not a regular file/],
    [notArchive, grpcStatus.INVALID_ARGUMENT, /not-an-archive\.tar is not a usable checkpoint archive/],
    [`${archives}/../${archives.split("/").pop()}/restore.tar`, grpcStatus.INVALID_ARGUMENT, /not a clean absolute path/],
  ];
  if (!experimental) cases.push([archive, grpcStatus.UNIMPLEMENTED, /cannot restore from .*restore\.tar: dockerd runs without --experimental/]);
  const before = await leakedContainers(h);
  for (const [image, code, details] of cases) {
    try {
      await h.client.call("CreateContainer", { podSandboxId: pod.podSandboxId, config: { ...containerConfig("restored", ["sh"]), image: { image } }, sandboxConfig: pod.config });
      t.fail(`CreateContainer from ${image} succeeded`);
    } catch (err) {
      t.equal((err as { code: number }).code, code, image);
      t.match((err as { details: string }).details, details, image);
    }
  }
  t.same(await leakedContainers(h), before, "no container created");
});

t.test("a restore's staging in a created container, on this dockerd (the part that needs no CRIU)", async (t) => {
  const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  t.teardown(() => docker.close());
  const image = await docker.inspectImage(BUSYBOX_IMAGE);
  const archive = await restoreArchive(image.Id);
  const id = await createContainer(h, pod, containerConfig("staged", ["sleep", "60"]));
  const c = await docker.inspectContainer(id);
  const files = new DockerImageFiles(docker, silentLogger);
  const restorer = new ContainerRestorer(docker, { resolveImage: async () => ({ id: image.Id }) }, new CheckpointImages(files, archives), silentLogger);
  const plan = { archive, source: archive, metadata: await readCheckpointArchive(archive), image: { id: image.Id }, imageName: BUSYBOX_IMAGE, release: async () => undefined };
  const info = await docker.info();
  if (c.GraphDriver?.Name !== "overlay2") {
    // Engine 29's containerd image store: no upper directory cridock could put a whiteout in.
    try {
      await restorer.stage(c, plan);
      t.fail("staged deletions on a driver without an upper directory");
    } catch (err) {
      t.match((err as Error).message, new RegExp(`only on the overlay2 storage driver \\(dockerd's is ${c.GraphDriver?.Name ?? "unknown"}\\)`));
    }
    return;
  }
  const result = await restorer.stage(c, plan);
  t.same(result, { imageFiles: 2, rootfsDiff: true, whiteouts: 1 });
  const staged = join(info.DockerRootDir, "containers", id, "checkpoints", RESTORE_CHECKPOINT);
  t.same((await readdir(staged)).sort(), ["inventory.img", "pages-1.img"], "CRIU's images where Docker's start --checkpoint reads them");
  t.equal(await readFile(join(staged, "inventory.img"), "utf8"), "inventory");
  t.ok(await docker.containerPathExists(id, "/etc/cridock-restored"), "rootfs-diff.tar's file is in the container's filesystem");
  t.notOk(await docker.containerPathExists(id, "/etc/group"), "the deleted file is gone from it, as Docker sees it");
  t.ok(await docker.containerPathExists(id, "/etc/passwd"), "its neighbours are not");
});

/**
 * A checkpoint image, as `checkpointctl build` makes one and Docker's
 * classic store keeps it (its manifest's annotations dropped): FROM scratch,
 * nothing to run, its one layer the archive's members. kubelet names such
 * an image (by its id) in CreateContainer: recognised, it is refused on this
 * dockerd for want of --experimental, not created as an ordinary container;
 * its checkpoint copies out into an archive the restore reads as the
 * original; an image with nothing to run but no checkpoint is an ordinary one.
 */
t.test("a checkpoint image: recognised, refused without --experimental, its checkpoint copied out whole", async (t) => {
  const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  t.teardown(() => docker.close());
  const busybox = await docker.inspectImage(BUSYBOX_IMAGE);
  const archive = await restoreArchive(busybox.Id);
  const tag = `cridock-test/checkpoint-image:${process.pid}`;
  const plainTag = `cridock-test/files-only:${process.pid}`;
  const imageArchive = join(archives, "checkpoint-image.tar");
  await writeLayerImageArchive(archive, imageArchive, tag);
  const plainLayer = join(archives, "files-only-layer.tar");
  await writeTarAtomically(plainLayer, (pack) => addEntry(pack, { name: "etc/cridock-files-only", mode: 0o644 }, Buffer.from("x\n")));
  const plainArchive = join(archives, "files-only.tar");
  await writeLayerImageArchive(plainLayer, plainArchive, plainTag);
  const dockerCli = (...args: string[]) => execFileSync("docker", ["-H", TEST_DOCKER_ENDPOINT, ...args], { stdio: "pipe" }).toString();
  dockerCli("load", "--quiet", "--input", imageArchive);
  dockerCli("load", "--quiet", "--input", plainArchive);
  t.teardown(() => void dockerCli("rmi", "-f", tag, plainTag));
  // Docker's ids (the containerd store's are the manifest's digest, not the config's).
  const [checkpointInspect, plainInspect] = [await docker.inspectImage(tag), await docker.inspectImage(plainTag)];
  const checkpointImage = checkpointInspect.Id;

  const files = new DockerImageFiles(docker, silentLogger);
  const images = new CheckpointImages(files, join(archives, "work"));
  t.ok(await images.holdsCheckpoint(checkpointImage, checkpointInspect.Config), `${CHECKPOINT_IMAGE_MARKER} at its root: a checkpoint image`);
  t.notOk(await images.holdsCheckpoint(plainInspect.Id, plainInspect.Config), "files only, no checkpoint: an ordinary image");
  t.notOk(await images.holdsCheckpoint(busybox.Id, busybox.Config), "an image with a command is never looked into");

  const copy = await images.copyToArchive(checkpointImage);
  const copied = await readCheckpointArchive(copy.path);
  t.same(copied, await readCheckpointArchive(archive), "the copy reads as the archive the image was built from");
  t.same(await readdir(join(archives, "work")), [copy.path.split("/").pop()], "one archive in the work directory, no temporary file");
  await copy.release();
  t.same(await readdir(join(archives, "work")), [], "released: nothing left");

  if (!experimental) {
    const before = await leakedContainers(h);
    try {
      // kubelet passes the image's id, as ImageStatus gave it.
      await h.client.call("CreateContainer", { podSandboxId: pod.podSandboxId, config: { ...containerConfig("from-image", []), image: { image: checkpointImage } }, sandboxConfig: pod.config });
      t.fail("CreateContainer from a checkpoint image succeeded on a dockerd without --experimental");
    } catch (err) {
      t.equal((err as { code: number }).code, grpcStatus.UNIMPLEMENTED);
      t.match((err as { details: string }).details, `cannot restore from checkpoint image ${checkpointImage}: dockerd runs without --experimental`);
    }
    t.same(await leakedContainers(h), before, "no container created");
    t.same(await readdir(join(h.cridock.rootDirectory, "checkpoint-work")).catch(() => []), [], "nothing copied out before the refusal");
  }
  // An image with nothing to run and no checkpoint is created as any image is (its command from the request).
  const plain = await createContainer(h, pod, { ...containerConfig("files-only", ["/bin/true"]), image: { image: plainTag } });
  // CRI's command is Docker's Entrypoint.
  t.match((await docker.inspectContainer(plain)).Config.Entrypoint, ["/bin/true"], "created as an ordinary container");
});

t.test("no container left behind", async (t) => {
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
});
