/**
 * Bind mount options (CRI Mount.mount_options, kubelet's
 * VolumeBindMountOptions) end to end, on a dockerd of the test's own
 * (test/helpers/private-dockerd.ts) running the binary of the engine under
 * test (Engine 29 on the primary run; CRIDOCK_TEST_DOCKERD_BIN names
 * another), so that the node's engines are never reconfigured:
 * - without cridock's OCI runtime layer, Status declares no mount_options,
 *   `cridock check` says why, and a container that asks for them is
 *   FAILED_PRECONDITION naming the layer and how to install it: none is
 *   created;
 * - with the layer installed, Status declares them, and the container's
 *   own /proc/self/mountinfo shows noexec, nosuid and nodev on that mount
 *   (beside ro on a read-only one), an executable copied into it fails with
 *   "Permission denied", and the same binary runs from a volume that asked
 *   for nothing;
 * - image volumes with options are INVALID_ARGUMENT, as are options kubelet
 *   does not allow.
 * Nothing is left behind: containers, the layer's registration, its edits.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { privateDockerd } from "../../helpers/private-dockerd.ts";
import { ociLayerCommand, ociLayerPaths } from "../../helpers/oci-layer-command.ts";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { BUSYBOX_IMAGE, PAUSE_IMAGE, TEST_DOCKER_SOCKET } from "../../helpers/env.ts";

const REPO = resolve(import.meta.dirname, "../../..");

/**
 * The dockerd binary of the engine under test, for a daemon of the test's
 * own: CRIDOCK_TEST_DOCKERD_BIN, else the executable behind the test
 * engine's pid file (scripts/env/test-engines.sh keeps it beside the
 * socket), else `dockerd` on PATH.
 */
function engineBinary(): string {
  if (process.env.CRIDOCK_TEST_DOCKERD_BIN) return process.env.CRIDOCK_TEST_DOCKERD_BIN;
  try {
    const pid = readFileSync(join(dirname(TEST_DOCKER_SOCKET), "dockerd.pid"), "utf8").trim();
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return "dockerd";
  }
}

t.test("bind mount options through the OCI layer: refused without it, in force with it", async (t) => {
  const dockerd = await privateDockerd({ bridge: "cridock-mo0", configFile: true, binary: engineBinary() });
  t.teardown(() => dockerd.destroy());
  await dockerd.start();
  const work = mkdtempSync(join(tmpdir(), "cridock-mount-options-"));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const { editsDir } = ociLayerPaths(work);
  const layer = ociLayerCommand(dockerd, work);
  const flags = [`--docker-endpoint=${dockerd.endpoint}`, "--network-plugin=no-op", `--pod-infra-container-image=${PAUSE_IMAGE}`];
  const cridock = await startCridockProcess({ flags });
  t.teardown(() => cridock.stop());
  const client = cridock.client;
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const check = () => spawnSync(process.execPath, [join(REPO, "bin/cridock.js"), "check", ...flags, `--root-directory=${join(work, "check-root")}`], { encoding: "utf8", timeout: 120_000 }).stdout;
  const mountOptionsDeclared = async () => (await client.call("Status", {})).features?.mountOptions === true;
  const engine = JSON.parse(spawnSync("docker", ["-H", dockerd.endpoint, "version", "--format", "{{json .Server.Version}}"], { encoding: "utf8" }).stdout || '""');
  t.comment(`engine ${engine} (${engineBinary()})`);

  // Host directories for the volumes, as kubelet's emptyDirs are.
  const volumes = join(work, "volumes");
  for (const name of ["data", "config", "plain"]) mkdirSync(join(volumes, name), { recursive: true });
  const uid = `mount-options-${process.pid}-${Date.now()}`;
  const sandboxConfig = { metadata: { name: "mount-options", namespace: "cridock-test", uid, attempt: 0 }, logDirectory: join(work, "logs"), linux: {} };
  const { podSandboxId } = await client.call("RunPodSandbox", { config: sandboxConfig });
  t.teardown(async () => {
    await client.call("StopPodSandbox", { podSandboxId }).catch(() => undefined);
    await client.call("RemovePodSandbox", { podSandboxId }).catch(() => undefined);
  });
  const config = (name: string, mounts: object[]) => ({
    metadata: { name, attempt: 0 },
    image: { image: BUSYBOX_IMAGE },
    command: ["sleep", "600"],
    mounts,
  });
  const withOptions = [
    { containerPath: "/data", hostPath: join(volumes, "data"), mountOptions: ["noexec", "nosuid", "nodev"] },
    { containerPath: "/config", hostPath: join(volumes, "config"), readonly: true, mountOptions: ["nodev"] },
    { containerPath: "/plain", hostPath: join(volumes, "plain") },
  ];
  const containersOfPod = () => spawnSync("docker", ["-H", dockerd.endpoint, "ps", "-aq", "--filter", `label=io.kubernetes.pod.uid=${uid}`, "--filter", "label=io.kubernetes.docker.type=container"], { encoding: "utf8" }).stdout.trim();

  t.test("without the layer: not declared, said by cridock check, refused by name", async (t) => {
    t.equal(await mountOptionsDeclared(), false, "Status declares no mount_options");
    t.match(check(), /^WARN +mount-options +bind mount options \(noexec, nodev, nosuid\) cannot be honoured: dockerd has no runtime named "cridock"/m);
    const refused = await client.call("CreateContainer", { podSandboxId, sandboxConfig, config: config("refused", withOptions) }).catch((e: unknown) => e);
    t.match(refused, {
      code: grpcStatus.FAILED_PRECONDITION,
      details: /asks for bind mount options on \/data \(noexec,nosuid,nodev\), \/config \(nodev\), which this node cannot honour: .*OCI runtime layer.*cridock oci-layer install/,
    });
    t.equal(containersOfPod(), "", "no container was created");
  });

  t.test("options kubelet does not allow, and image volumes with options, are INVALID_ARGUMENT", async (t) => {
    const exec = await client.call("CreateContainer", { podSandboxId, sandboxConfig, config: config("bad", [{ containerPath: "/data", hostPath: join(volumes, "data"), mountOptions: ["exec"] }]) }).catch((e: unknown) => e);
    t.match(exec, { code: grpcStatus.INVALID_ARGUMENT, details: /mount \/data: mount option "exec" is not one of noexec, nodev, nosuid/ });
    const twice = await client.call("CreateContainer", { podSandboxId, sandboxConfig, config: config("bad", [{ containerPath: "/data", hostPath: join(volumes, "data"), mountOptions: ["nodev", "nodev"] }]) }).catch((e: unknown) => e);
    t.match(twice, { code: grpcStatus.INVALID_ARGUMENT, details: /"nodev" is given twice/ });
    const image = await client.call("CreateContainer", { podSandboxId, sandboxConfig, config: config("bad", [{ containerPath: "/img", image: { image: BUSYBOX_IMAGE }, readonly: true, mountOptions: ["noexec"] }]) }).catch((e: unknown) => e);
    t.match(image, { code: grpcStatus.INVALID_ARGUMENT, details: /image volume \/img .* image volumes take no bind mount options/ });
    t.equal(containersOfPod(), "", "no container was created");
  });

  t.test("with the layer: declared, and in force on that mount from the container's first instruction", async (t) => {
    const installed = layer("install");
    t.equal(installed.status, 0, `install: ${installed.stdout}${installed.stderr}`);
    t.teardown(() => void layer("uninstall"));
    // Status' features stand a minute (runtime/status.ts): the layer is declared within it.
    let declared = await mountOptionsDeclared();
    for (const deadline = Date.now() + 90_000; !declared && Date.now() < deadline; declared = await mountOptionsDeclared()) {
      await new Promise((r) => setTimeout(r, 1000));
    }
    t.ok(declared, "Status declares mount_options once the layer is registered");
    t.match(check(), /^OK +mount-options +bind mount options \(noexec, nodev, nosuid\) are honoured/m);

    const { containerId } = await client.call("CreateContainer", { podSandboxId, sandboxConfig, config: config("app", withOptions) });
    await client.call("StartContainer", { containerId });
    const status = (await client.call("ContainerStatus", { containerId })).status;
    t.same(
      status.mounts.map((m: { containerPath: string; mountOptions: string[] }) => [m.containerPath, m.mountOptions]),
      [["/data", ["noexec", "nosuid", "nodev"]], ["/config", ["nodev"]], ["/plain", []]],
      "ContainerStatus reports each mount's options",
    );
    const sh = async (script: string) => {
      const r = await client.call("ExecSync", { containerId, cmd: ["sh", "-c", script], timeout: 30 });
      return { code: r.exitCode as number, out: Buffer.from(r.stdout).toString().trim(), err: Buffer.from(r.stderr).toString().trim() };
    };
    // mountinfo's sixth field: the mount's own options, as the kernel applies them.
    const options = async (path: string) => (await sh(`awk '$5 == "${path}" { print $6 }' /proc/self/mountinfo`)).out.split(",");
    const data = await options("/data");
    for (const o of ["rw", "noexec", "nosuid", "nodev"]) t.ok(data.includes(o), `/data is ${o} (${data.join(",")})`);
    const cfg = await options("/config");
    for (const o of ["ro", "nodev"]) t.ok(cfg.includes(o), `/config keeps ro beside nodev (${cfg.join(",")})`);
    t.notOk(cfg.includes("noexec"), "/config asked for nodev only");
    const plain = await options("/plain");
    t.notOk(plain.includes("noexec") || plain.includes("nodev"), `/plain asked for nothing (${plain.join(",")})`);

    const denied = await sh("cp /bin/sh /data/sh && /data/sh -c true");
    t.equal(denied.code, 126, "an executable copied into the noexec volume cannot run");
    t.match(denied.err, /Permission denied/);
    const allowed = await sh("cp /bin/sh /plain/sh && /plain/sh -c 'echo ran'");
    t.same([allowed.code, allowed.out], [0, "ran"], "the same binary runs from a volume without options");

    await client.call("StopContainer", { containerId, timeout: 0 });
    await client.call("RemoveContainer", { containerId });
    t.same(existsSync(editsDir) ? readdirSync(editsDir) : [], [], "no spec edits left behind");
  });
});
