/**
 * Image volumes (CRI Mount.image, image_sub_path): on an engine with
 * Engine API 1.48 or newer the pod sees the image's files, read-only, the
 * whole image and a sub-path, the same image at two places, not noexec,
 * each reported with the id PullImage returned (image_ref); a sub-path the
 * image lacks is a clear error; a request that is not read-only is refused;
 * removing the pod leaves no mount behind. On
 * an older engine (20.10) the request is FAILED_PRECONDITION naming the
 * engine. Runs against CRIDOCK_TEST_DOCKER_ENDPOINT, on both image stores.
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { escapeRegExp } from "../../helpers/regexp.ts";
import { IMAGE_VOLUME_FILES, IMAGE_VOLUME_IMAGE } from "../../helpers/env.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, status } from "./harness.ts";

const h = await startHarness();
t.teardown(async () => {
  await h.close();
});
/** What PullImage returned: ContainerStatus must report it as each image volume's image_ref. */
const pulledRef = (await h.client.imageCall("PullImage", { image: { image: IMAGE_VOLUME_IMAGE } })).imageRef as string;

const [engineVersion, engineApi] = execFileSync("docker", ["version", "--format", "{{.Server.Version}} {{.Server.APIVersion}}"], { encoding: "utf8" })
  .trim()
  .split(" ") as [string, string];
const [major, minor] = engineApi.split(".").map(Number) as [number, number];
const canMountImages = major > 1 || (major === 1 && minor >= 48);
t.comment(`engine Docker ${engineVersion}, Engine API ${engineApi}: image mounts ${canMountImages ? "expected to work" : "expected to be refused"}`);

async function exec(id: string, cmd: string[]) {
  const r = await h.client.call("ExecSync", { containerId: id, cmd, timeout: 10n });
  return { code: r.exitCode as number, out: Buffer.from(r.stdout).toString(), err: Buffer.from(r.stderr).toString() };
}

const imageVolume = (containerPath: string, over: object = {}) => ({ containerPath, image: { image: IMAGE_VOLUME_IMAGE }, readonly: true, ...over });

/**
 * A mount's identity as the host sees it too: the root of the mount within
 * its file system, then its type, source and super options (mountinfo
 * fields 4 and those after " - "). An overlay is told apart by its layer
 * directories alone (a sub-path mount of it has another root), a bind by
 * its root.
 */
function identityOf(line: string): string {
  const superblock = line.split(" - ")[1] ?? "";
  // An overlay's layer directories are its own; its root differs for a sub-path mount.
  return superblock.startsWith("overlay ") ? superblock : `${line.split(" ")[3]} ${superblock}`;
}
function superblockOf(mountinfo: string, mountPoint: string): string | undefined {
  const line = mountinfo.split("\n").find((l) => l.split(" ")[4] === mountPoint);
  return line === undefined ? undefined : identityOf(line);
}

t.test("image volumes", { skip: !canMountImages && "the engine cannot mount images (checked below)" }, async (t) => {
  const pod = await runPod(h);
  let podRemoved = false;
  t.teardown(() => (podRemoved ? undefined : removePod(h, pod.podSandboxId)));
  const mounts = [imageVolume("/vol"), imageVolume("/again"), imageVolume("/sub", { imageSubPath: "content/sub" })];
  const id = await createContainer(h, pod, containerConfig("image-volumes", ["sleep", "3600"], { mounts }));
  await h.client.call("StartContainer", { containerId: id });

  t.equal((await exec(id, ["cat", "/vol/content/hello.txt"])).out, IMAGE_VOLUME_FILES["/content/hello.txt"], "the whole image");
  t.equal((await exec(id, ["cat", "/again/content/hello.txt"])).out, IMAGE_VOLUME_FILES["/content/hello.txt"], "the same image at a second place");
  t.equal((await exec(id, ["cat", "/sub/inner.txt"])).out, IMAGE_VOLUME_FILES["/content/sub/inner.txt"], "a sub-path of the image");
  const write = await exec(id, ["touch", "/vol/written"]);
  t.not(write.code, 0, "read-only");
  t.match(write.err, /Read-only file system/);
  const ran = await exec(id, ["/vol/bin/sh", "-c", "echo ran from the volume"]);
  t.same([ran.code, ran.out], [0, "ran from the volume\n"], "not noexec: the image's own programs run from the volume");

  const s = await status(h, id);
  t.same(
    s.mounts.map((m: { containerPath: string; image?: { image: string }; imageSubPath: string; readonly: boolean }) => [m.containerPath, m.image?.image, m.imageSubPath, m.readonly]),
    [["/vol", IMAGE_VOLUME_IMAGE, "", true], ["/again", IMAGE_VOLUME_IMAGE, "", true], ["/sub", IMAGE_VOLUME_IMAGE, "content/sub", true]],
    "ContainerStatus reports the mounts as requested",
  );
  t.match(pulledRef, /^sha256:[0-9a-f]{64}$/, "PullImage returns Docker's image id");
  t.same(
    s.mounts.map((m: { image?: { imageRef?: string } }) => m.image?.imageRef),
    [pulledRef, pulledRef, pulledRef],
    "each image volume's image_ref (ImageSpec field 20) is the id PullImage returned",
  );

  // What backs each image mount, as the host sees it; it must go with the pod.
  const inside = (await exec(id, ["cat", "/proc/self/mountinfo"])).out;
  const backing = ["/vol", "/again", "/sub"].map((p) => superblockOf(inside, p));
  t.ok(backing.every(Boolean), "each image volume is a mount of its own in the container");
  t.not(backing[0], backing[1], "the two mounts of one image are separate layers");
  const hostMounts = () => readFile("/proc/self/mountinfo", "utf8");
  const onHost = (text: string) => backing.filter((b) => b && text.split("\n").some((l) => l && identityOf(l) === b));
  t.equal(onHost(await hostMounts()).length, 3, "the host holds the image volumes' mounts while the pod runs");

  await removePod(h, pod.podSandboxId);
  podRemoved = true;
  t.same(onHost(await hostMounts()), [], "no image volume mount is left on the host after the pod is removed");
  t.same(await leakedContainers(h), [], "no container left");
  const scratch = execFileSync("docker", ["ps", "-aq", "--filter", "label=io.cridock.scratch"], { encoding: "utf8" }).trim();
  t.equal(scratch, "", "no scratch container left (the sub-path check reads the image through one)");
});

t.test("a sub-path the image does not have is a clear error", { skip: !canMountImages && "the engine cannot mount images" }, async (t) => {
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));
  await t.rejects(
    createContainer(h, pod, containerConfig("image-volume-missing", ["sleep", "3600"], { mounts: [imageVolume("/sub", { imageSubPath: "no/such/dir" })] })),
    { code: grpcStatus.FAILED_PRECONDITION, message: new RegExp(`image_sub_path "no/such/dir" does not exist in image ${IMAGE_VOLUME_IMAGE.replace(/[.]/g, "\\.")}`) },
  );
  await t.rejects(
    createContainer(h, pod, containerConfig("image-volume-escape", ["sleep", "3600"], { mounts: [imageVolume("/sub", { imageSubPath: "../etc" })] })),
    { code: grpcStatus.INVALID_ARGUMENT },
  );
});

t.test("an image volume that is not read-only is refused on every engine, before the engine is asked", async (t) => {
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));
  await t.rejects(
    createContainer(h, pod, containerConfig("image-volume-rw", ["sleep", "3600"], { mounts: [imageVolume("/vol", { readonly: false })] })),
    { code: grpcStatus.INVALID_ARGUMENT, message: /image volume \/vol: image volumes are read-only; set readonly to true/ },
  );
  const listed = await h.client.call("ListContainers", { filter: { podSandboxId: pod.podSandboxId } });
  t.same(listed.containers, [], "no container was created");
});

t.test("an engine before Engine API 1.48 refuses image volumes, naming itself", { skip: canMountImages && "the engine can mount images" }, async (t) => {
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));
  await t.rejects(createContainer(h, pod, containerConfig("image-volume-old", ["sleep", "3600"], { mounts: [imageVolume("/vol")] })), {
    code: grpcStatus.FAILED_PRECONDITION,
    message: new RegExp(`Engine API 1\\.48 \\(Docker 28\\.0\\) or newer; this engine is Docker ${escapeRegExp(engineVersion)} with Engine API ${escapeRegExp(engineApi)}`),
  });
});

t.test("nothing leaked", async (t) => {
  t.same(await leakedContainers(h), []);
});
