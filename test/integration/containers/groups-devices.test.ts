/**
 * The supplemental groups policy and CDI devices, on the engine under test:
 * - Merge (the default) lets Docker add the groups the image's /etc/group
 *   gives the user; Strict does not (every engine), and ContainerStatus.user
 *   reports the process's real identity; Status advertises Strict.
 * - A container that asks for the test environment's CDI device
 *   (scripts/env/cdi.sh) gets its device node, mount and environment
 *   variable where the engine's CDI support is on, and FAILED_PRECONDITION
 *   naming the engine where it is not (20.10).
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { escapeRegExp } from "../../helpers/regexp.ts";
import { CDI_TEST_DEVICE, CDI_TEST_EDITS, GROUPS_IMAGE, GROUPS_IMAGE_USER } from "../../helpers/env.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, status, waitLog } from "./harness.ts";

const h = await startHarness();
t.teardown(async () => {
  await h.close();
});
await h.client.imageCall("PullImage", { image: { image: GROUPS_IMAGE } });
const pod = await runPod(h);
t.teardown(() => removePod(h, pod.podSandboxId));

async function exec(id: string, cmd: string[]) {
  const r = await h.client.call("ExecSync", { containerId: id, cmd, timeout: 10n });
  return { code: r.exitCode as number, out: Buffer.from(r.stdout).toString().trim(), err: Buffer.from(r.stderr).toString() };
}

const sorted = (ids: (number | bigint | string)[]) => ids.map(Number).sort((a, b) => a - b);
const STRICT = 1;
const { uid: APP_UID, gid: APP_GID, imageGroups: IMAGE_GROUPS } = GROUPS_IMAGE_USER;
const CDI_ENV_NAME = CDI_TEST_EDITS.env.split("=")[0]!;

/** Runs the groups image with `securityContext`; returns `id -G` and ContainerStatus.user. */
async function groupsOf(name: string, securityContext: object) {
  const id = await createContainer(h, pod, { ...containerConfig(name, ["sleep", "3600"]), image: { image: GROUPS_IMAGE }, linux: { securityContext } });
  await h.client.call("StartContainer", { containerId: id });
  const ids = await exec(id, ["id", "-u"]);
  const groups = await exec(id, ["id", "-G"]);
  const user = (await status(h, id)).user?.linux;
  return {
    uid: Number(ids.out),
    groups: sorted(groups.out.split(/\s+/)),
    status: user ? { uid: Number(user.uid), gid: Number(user.gid), groups: sorted(user.supplementalGroups) } : undefined,
  };
}

t.test("Status advertises the supplemental groups policy", async (t) => {
  const s = await h.client.call("Status", { verbose: false });
  t.equal(s.features?.supplementalGroupsPolicy, true);
});

t.test("Merge adds the image's groups; Strict does not, and ContainerStatus.user agrees", async (t) => {
  const merge = await groupsOf("groups-merge", { runAsUser: { value: BigInt(APP_UID) }, supplementalGroups: [1234n] });
  const mergeGroups = sorted([APP_GID, 1234, ...IMAGE_GROUPS]);
  t.same(merge.groups, mergeGroups, "Merge: id -G shows the groups /etc/group of the image gives the user");
  t.same(merge.status, { uid: APP_UID, gid: APP_GID, groups: mergeGroups }, "Merge: ContainerStatus.user");

  const strict = await groupsOf("groups-strict", { runAsUser: { value: BigInt(APP_UID) }, supplementalGroups: [1234n], supplementalGroupsPolicy: STRICT });
  const strictGroups = sorted([APP_GID, 1234]);
  t.equal(strict.uid, APP_UID);
  t.same(strict.groups, strictGroups, "Strict: only the primary group (from the image's /etc/passwd) and the pod's groups");
  t.same(strict.status, { uid: APP_UID, gid: APP_GID, groups: strictGroups }, "Strict: ContainerStatus.user");

  const imageUser = await groupsOf("groups-strict-image-user", { supplementalGroupsPolicy: STRICT });
  t.same(imageUser.status, { uid: APP_UID, gid: APP_GID, groups: [APP_GID] }, "Strict with the image's USER (a name) and no groups asked");

  const withGroup = await groupsOf("groups-strict-run-as-group", { runAsUser: { value: BigInt(APP_UID) }, runAsGroup: { value: 3000n }, supplementalGroupsPolicy: STRICT });
  t.same(withGroup.status, { uid: APP_UID, gid: 3000, groups: [3000] }, "Strict with run_as_group");
});

/** The engine's CDI spec directories as /info reports them ([] when CDI is off or the engine predates the field). */
function cdiSpecDirs(): string[] {
  const info = JSON.parse(execFileSync("docker", ["info", "--format", "{{json .}}"], { encoding: "utf8" })) as { CDISpecDirs?: string[] | null };
  return info.CDISpecDirs ?? [];
}

t.test("CDI devices", async (t) => {
  const dirs = cdiSpecDirs();
  t.comment(`the engine's CDI spec directories: ${JSON.stringify(dirs)}`);
  const config = (name: string, device: string) => ({ ...containerConfig(name, ["sleep", "3600"]), CDIDevices: [{ name: device }] });
  await t.rejects(createContainer(h, pod, config("cdi-bad-name", "not-qualified")), { code: grpcStatus.INVALID_ARGUMENT });
  if (dirs.length === 0) {
    const version = execFileSync("docker", ["version", "--format", "{{.Server.Version}}"], { encoding: "utf8" }).trim();
    await t.rejects(createContainer(h, pod, config("cdi-refused", CDI_TEST_DEVICE)), {
      code: grpcStatus.FAILED_PRECONDITION,
      message: new RegExp(`CDI support is on.*this engine is Docker ${escapeRegExp(version)}`),
    });
    return;
  }
  t.ok(dirs.includes("/etc/cdi"), "the engine reads /etc/cdi, where the test device is described");
  // The container's own process prints the variable: dockerd adds CDI's environment to the
  // process it starts, not to Config.Env, which is all Docker gives a later exec.
  const id = await createContainer(h, pod, {
    ...config("cdi-device", CDI_TEST_DEVICE),
    command: ["sh", "-c", `echo "${CDI_ENV_NAME}=$${CDI_ENV_NAME}"; exec sleep 3600`],
  });
  await h.client.call("StartContainer", { containerId: id });
  const node = await exec(id, ["stat", "-c", "%F %t,%T", CDI_TEST_EDITS.deviceNode]);
  t.equal(node.out, `character special file ${CDI_TEST_EDITS.deviceNumbers}`, "the device node");
  t.equal((await exec(id, ["sh", "-c", `echo x > ${CDI_TEST_EDITS.deviceNode} && echo written`])).out, "written", "the device is usable (the cgroup allows it)");
  t.equal((await exec(id, ["cat", CDI_TEST_EDITS.mountedFile])).out, CDI_TEST_EDITS.mountedText.trim(), "the mount");
  const log = await waitLog((await status(h, id)).logPath, (text) => text.includes(`${CDI_ENV_NAME}=`));
  t.match(log, new RegExp(` stdout F ${CDI_TEST_EDITS.env}\n`), "the environment variable");
  // As under containerd, an exec process sees the device's environment too (cridock adds it: Docker gives exec Config.Env only).
  t.equal((await exec(id, ["sh", "-c", `echo "${CDI_ENV_NAME}=$${CDI_ENV_NAME}"`])).out, CDI_TEST_EDITS.env, "the environment variable in an exec process");
});

t.test("nothing leaked", async (t) => {
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
  const scratch = execFileSync("docker", ["ps", "-aq", "--filter", "label=io.cridock.scratch"], { encoding: "utf8" }).trim();
  t.equal(scratch, "", "no scratch container left (Strict reads /etc/passwd through one)");
});
