/**
 * Bind mount options (CRI Mount.mount_options) through CreateContainer and
 * StartContainer: with cridock's OCI runtime layer, the container is
 * created for it and its start hands the options to it as spec edits;
 * without it, FAILED_PRECONDITION naming what the node lacks, and nothing
 * is created, not even a missing host path. dockerd is a fake recording
 * what it was asked; the edits directory is real.
 */
import t, { type Test } from "tap";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ContainerManager, type ContainerManagerOptions } from "../../../../src/runtime/container/manager.ts";
import { createLogger } from "../../../../src/log.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { ContainerCreateBody } from "../../../../src/docker/types.ts";
import type { LogFollowers } from "../../../../src/logs/followers.ts";
import type { ContainerSpec, MountSpec } from "../../../../src/runtime/container/spec.ts";
import type { SandboxView } from "../../../../src/runtime/sandbox/view.ts";
import type { OciLayer } from "../../../../src/oci/layer.ts";
import { mountOptionsSupport, type MountOptionsSupport } from "../../../../src/oci/mount-options.ts";
import { specFromCri, statusToCri } from "../../../../src/cri/container-rpcs.ts";
import { containerInfo } from "../../../../src/runtime/container/convert.ts";

const ID = "c".repeat(64);
const SANDBOX = "5".repeat(64);
const view: SandboxView = {
  id: SANDBOX, metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 }, ready: true, pid: 1,
  logDirectory: "", cgroupParent: "", hostNetwork: false, hostPid: false, hostIpc: false,
  runtimeHandler: "", netnsPath: "", ips: [], sysctls: {}, privileged: false,
};

function setup(t: Test, probe: (() => Promise<MountOptionsSupport>) | undefined) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-mount-options-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const layer: OciLayer = { runtime: "cridock", launcher: join(dir, "oci-runtime"), delegate: "runc", editsDir: join(dir, "edits") };
  const calls: string[] = [];
  let created: ContainerCreateBody | undefined;
  const editsAtStart: unknown[] = [];
  const docker = {
    apiVersion: async () => "1.52",
    info: async () => ({}),
    events: { announce: () => undefined },
    createContainer: async (_name: string, body: ContainerCreateBody) => {
      calls.push("create");
      created = body;
      return { Id: ID };
    },
    inspectContainer: async () => ({
      Id: ID,
      Name: "/k8s_app_web_default_u1_0",
      State: { Status: "created", ExitCode: 0, Running: false, Pid: 0 },
      Config: { Labels: created?.Labels ?? {}, Tty: false },
      HostConfig: { LogConfig: { Type: "json-file" }, ...created?.HostConfig },
    }),
    inspectContainerCached: async () => (docker as unknown as { inspectContainer: () => Promise<unknown> }).inspectContainer(),
    startContainer: async () => {
      calls.push("start");
      // The layer reads the edits during Docker's start: they must be there then.
      const path = join(layer.editsDir, `${ID}.json`);
      editsAtStart.push(existsSync(path) ? JSON.parse(readFileSync(path, "utf8")) : undefined);
    },
  } as unknown as DockerClient;
  const manager = new ContainerManager({
    docker,
    log: createLogger("silent" as never),
    logs: { start: async () => undefined } as unknown as LogFollowers,
    sandboxes: { view: async () => view },
    images: { resolveImage: async () => ({ id: `sha256:${"a".repeat(64)}`, inspect: { Config: { Cmd: ["sh"] } } }) },
    files: { exists: async () => false, readText: async () => undefined } as unknown as ContainerManagerOptions["files"],
    logMaxSize: "10m",
    logMaxFile: 3,
    mountOptions: probe && (() => probe()),
  });
  return { dir, layer, manager, calls, created: () => created, editsAtStart };
}

const spec = (mounts: MountSpec[]): ContainerSpec => ({
  name: "app", attempt: 0, image: "busybox", command: [], args: [], workingDir: "", envs: [], mounts, devices: [],
  cdiDevices: [], labels: {}, annotations: {}, logPath: "", stdin: false, stdinOnce: false, tty: false, stopSignal: "",
});
const mount = (hostPath: string, over: Partial<MountSpec> = {}): MountSpec => ({
  containerPath: "/data", hostPath, readonly: false, selinuxRelabel: false, propagation: "private", recursiveReadOnly: false,
  image: "", imageSubPath: "", ...over,
});

t.test("with the layer: created for it, and the start hands it each mount's options", async (t) => {
  const s = setup(t, async () => ({ ok: true, layer: s.layer }));
  const mounts = [mount(s.dir, { mountOptions: ["noexec", "nosuid", "nodev"] }), mount(s.dir, { containerPath: "/config", readonly: true }), mount(s.dir, { containerPath: "/logs", mountOptions: ["nodev"] })];
  t.equal(await s.manager.create(SANDBOX, spec(mounts)), ID);
  t.equal(s.created()?.HostConfig?.Runtime, "cridock", "created with the layer's runtime");
  await s.manager.start(ID);
  t.same(s.editsAtStart, [{ version: 1, mountOptions: [{ destination: "/data", options: ["noexec", "nosuid", "nodev"] }, { destination: "/logs", options: ["nodev"] }] }]);
  t.notOk(existsSync(join(s.layer.editsDir, `${ID}.json`)), "the edits go once the start returned");
});

t.test("without the layer: FAILED_PRECONDITION naming it and how to install it; nothing created, no host path made", async (t) => {
  const s = setup(t, async () => mountOptionsSupport({ ready: false, reason: 'dockerd has no runtime named "cridock": run `cridock oci-layer install` (the .deb\'s postinst does) to register it' }));
  const missing = join(s.dir, "volumes", "data");
  await t.rejects(s.manager.create(SANDBOX, spec([mount(missing, { mountOptions: ["noexec", "nosuid"] })])), {
    code: "FAILED_PRECONDITION",
    message: /container app of pod default\/web asks for bind mount options on \/data \(noexec,nosuid\), which this node cannot honour: .*OCI runtime layer, which this node lacks: dockerd has no runtime named "cridock": run `cridock oci-layer install`/,
  });
  t.same(s.calls, [], "no container");
  t.notOk(existsSync(missing), "the missing host path was not made");
  const none = setup(t, undefined);
  await t.rejects(none.manager.create(SANDBOX, spec([mount(none.dir, { mountOptions: ["nodev"] })])), { code: "FAILED_PRECONDITION", message: /started without its OCI runtime layer/ });
});

t.test("without the layer, a container that asks for no options is created and started as before", async (t) => {
  const s = setup(t, async () => ({ ok: false, reason: "no layer" }));
  await s.manager.create(SANDBOX, spec([mount(s.dir)]));
  t.equal(s.created()?.HostConfig?.Runtime, undefined, "Docker's default runtime");
  await s.manager.start(ID);
  t.same(s.editsAtStart, [undefined], "no edits");
});

t.test("a start that cannot give the options starts nothing", async (t) => {
  let layerThere = true;
  const s = setup(t, async () => (layerThere ? { ok: true, layer: s.layer } : { ok: false, reason: "gone" }));
  await s.manager.create(SANDBOX, spec([mount(s.dir, { mountOptions: ["noexec"] })]));
  layerThere = false;
  await t.rejects(s.manager.start(ID), { code: "FAILED_PRECONDITION", message: /container c+ asks for bind mount options on \/data \(noexec\), which this node cannot honour: gone/ });
  t.same(s.calls, ["create"], "the layer went away after the create: no start");
  layerThere = true;
  delete s.created()!.HostConfig!.Runtime;
  await t.rejects(s.manager.start(ID), { code: "FAILED_PRECONDITION", message: /created without cridock's OCI runtime layer \(runtime "default"\): create it again/ });
  t.same(s.calls, ["create"]);
  // A label some other hand rewrote: the start refuses rather than drop an option.
  s.created()!.HostConfig!.Runtime = "cridock";
  s.created()!.Labels!["io.cridock.mounts"] = JSON.stringify([{ ...mount(s.dir), mountOptions: ["noexec", "exec"] }]);
  await t.rejects(s.manager.start(ID), { code: "FAILED_PRECONDITION", message: /mount \/data carries bind mount options CreateContainer would not have accepted \(mount option "exec" is not one of/ });
  s.created()!.Labels!["io.cridock.mounts"] = JSON.stringify([{ ...mount(s.dir), mountOptions: "noexec" }]);
  await t.rejects(s.manager.start(ID), { code: "FAILED_PRECONDITION", message: /not a list/ });
  t.same(s.calls, ["create"]);
});

t.test("CRI mapping: mount_options reach the mount, travel on its label and come back in ContainerStatus", async (t) => {
  const requested = specFromCri({ metadata: { name: "app" }, image: { image: "busybox" }, mounts: [{ containerPath: "/data", hostPath: "/h", mountOptions: ["noexec", "nodev"] }, { containerPath: "/plain", hostPath: "/p" }] });
  t.same(requested.mounts[0]!.mountOptions, ["noexec", "nodev"]);
  t.notOk("mountOptions" in requested.mounts[1]!, "a mount without options is labelled as before");
  const labels = { "io.kubernetes.docker.type": "container", "io.cridock.mounts": JSON.stringify(requested.mounts) };
  const info = containerInfo({
    Id: ID, Name: "/k8s_app_web_default_u1_0", Image: "sha256:1", Created: "2026-01-01T00:00:00Z",
    State: { Status: "created", ExitCode: 0, Running: false, Pid: 0, StartedAt: "", FinishedAt: "" },
    Config: { Labels: labels }, HostConfig: {},
  } as never);
  const status = statusToCri(info);
  t.same(status.mounts?.map((m) => m.mountOptions), [["noexec", "nodev"], []]);
});
