import t from "tap";
import { createBody, checkLogPath, validateSpec } from "../../../../src/runtime/container/create.ts";
import { specFromCri } from "../../../../src/cri/container-rpcs.ts";
import type { ContainerSpec, SecuritySpec } from "../../../../src/runtime/container/spec.ts";
import { containerInfo, reasonOf, stateOf, summaryInfo } from "../../../../src/runtime/container/convert.ts";
import { EMPTY_RESOURCES, hostResources, updateFor } from "../../../../src/runtime/container/resources.ts";
import { securityHostConfig, type HostSecurity } from "../../../../src/runtime/container/security.ts";
import type { SandboxView } from "../../../../src/runtime/sandbox/view.ts";
import type { ContainerInspect } from "../../../../src/docker/types.ts";

const spec = (over: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name: "app", attempt: 1, image: "busybox", command: [], args: [], workingDir: "", envs: [], mounts: [], devices: [],
  cdiDevices: [], labels: { a: "b" }, annotations: { note: "x" }, logPath: "app/1.log", stdin: false, stdinOnce: false,
  tty: false, stopSignal: "", ...over,
});
const security = (over: Partial<SecuritySpec> = {}): SecuritySpec => ({
  privileged: false, capAdd: [], capDrop: [], capAddAmbient: [], pidMode: "pod", targetId: "",
  runAsUsername: "", readonlyRootfs: false, supplementalGroups: [], supplementalGroupsStrict: false,
  noNewPrivs: false, maskedPaths: [], readonlyPaths: [], ...over,
});
const view: SandboxView = {
  id: "f".repeat(64), metadata: { name: "pod", namespace: "ns", uid: "u1", attempt: 0 }, ready: true, pid: 1,
  logDirectory: "/var/log/pods/ns_pod_u1", cgroupParent: "/kubepods", hostNetwork: false, hostPid: false, hostIpc: false,
  runtimeHandler: "", netnsPath: "", ips: [], sysctls: {}, privileged: false,
};
const host: HostSecurity = {
  apparmorProfiles: async () => new Set(["loaded"]),
  readSeccompProfile: async (p) => (p === "/prof.json" ? '{ "defaultAction": "SCMP_ACT_ALLOW" }' : Promise.reject(new Error("ENOENT"))),
  capabilities: async () => ({ granted: ["CAP_CHOWN", "CAP_NET_ADMIN"], missing: [] }),
};
const opts = { logMaxSize: "10m", logMaxFile: 2, host };

t.test("bad requests are refused before anything is created", async (t) => {
  const bad: [Partial<ContainerSpec>, RegExp][] = [
    [{ name: "" }, /name is required/],
    [{ name: "a_b" }, /not a DNS-label-like name/],
    [{ image: "" }, /image.image is required/],
    [{ logPath: "../../etc/x.log" }, /escapes/],
    [{ logPath: "/abs.log" }, /relative/],
    [{ mounts: [{ containerPath: "/data", hostPath: "/tmp/../etc", readonly: false, selinuxRelabel: false, propagation: "private", recursiveReadOnly: false, image: "", imageSubPath: "" }] }, /\.\./],
    [{ mounts: [{ containerPath: "/data", hostPath: "rel/dir", readonly: false, selinuxRelabel: false, propagation: "private", recursiveReadOnly: false, image: "", imageSubPath: "" }] }, /absolute/],
    [{ envs: [{ key: "A=B", value: "" }] }, /environment/],
    [{ security: security({ runAsGroup: 5n }) }, /run_as_group/],
    [{ security: security({ capAdd: ["NET ADMIN"] }) }, /capability/],
    [{ devices: [{ hostPath: "/dev/null", containerPath: "/dev/x", permissions: "rwz" }] }, /permissions/],
  ];
  for (const [over, message] of bad) t.throws(() => validateSpec(spec(over)), message, String(message));
  t.throws(() => checkLogPath("a/../../b"), /escapes/);
  t.doesNotThrow(() => validateSpec(spec({ security: security({ runAsUser: 1000n, runAsGroup: 5n }) })));
});

t.test("the Docker body joins the sandbox and carries cri-dockerd labels", async (t) => {
  const body = await createBody(spec({ command: ["sh"], args: ["-c", "true"], envs: [{ key: "K", value: "v=1" }], stopSignal: "SIGUSR1" }), view, "sha256:abc", "", opts, { apiVersion: "1.41", relabels: false, imageMountIds: new Map() });
  const hc = body.HostConfig!;
  t.equal(hc.NetworkMode, `container:${view.id}`);
  t.equal(hc.IpcMode, `container:${view.id}`);
  t.equal(hc.PidMode, `container:${view.id}`);
  t.equal(hc.UTSMode, undefined);
  t.equal(hc.CgroupParent, "/kubepods");
  t.same(hc.LogConfig, { Type: "json-file", Config: { "max-size": "10m", "max-file": "2" } });
  t.same(body.Entrypoint, ["sh"]);
  t.same(body.Cmd, ["-c", "true"]);
  t.same(body.Env, ["K=v=1"]);
  t.equal(body.StopSignal, "SIGUSR1");
  t.equal(body.Labels!["io.kubernetes.docker.type"], "container");
  t.equal(body.Labels!["io.kubernetes.sandbox.id"], view.id);
  t.equal(body.Labels!["io.kubernetes.container.logpath"], "/var/log/pods/ns_pod_u1/app/1.log");
  t.equal(body.Labels!["annotation.note"], "x");
  t.equal(body.Hostname, undefined, "no hostname under container: network mode");
  t.equal(body.ExposedPorts, undefined);
  const defaults = await createBody(spec(), { ...view, hostNetwork: true, logDirectory: "" }, "sha256:abc", "", opts, { apiVersion: "1.41", relabels: false, imageMountIds: new Map() });
  t.equal(defaults.Entrypoint, undefined, "image ENTRYPOINT kept");
  t.equal(defaults.Cmd, undefined, "image CMD kept");
  t.equal(defaults.HostConfig!.UTSMode, "host");
  t.equal(defaults.Labels!["io.kubernetes.container.logpath"], "", "no log directory, no log file");
});

t.test("status reports the image as the pod names it, not the id kubelet resolved it to", async (t) => {
  // kubelet 1.27+ sends image = the image id and userSpecifiedImage = the pod's image.
  const config = { metadata: { name: "app", attempt: 0 }, image: { image: "sha256:abc", userSpecifiedImage: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1" } };
  const fromCri = specFromCri(config);
  t.equal(fromCri.image, "sha256:abc", "the id is what Docker creates from");
  const body = await createBody({ ...spec(), image: fromCri.image, userImage: fromCri.userImage }, view, "sha256:abc", "", opts, { apiVersion: "1.41", relabels: false, imageMountIds: new Map() });
  t.equal(body.Labels!["io.cridock.image"], "registry.k8s.io/e2e-test-images/busybox:1.37.0-1");
  const without = await createBody(spec({ image: "busybox:1" }), view, "sha256:abc", "", opts, { apiVersion: "1.41", relabels: false, imageMountIds: new Map() });
  t.equal(without.Labels!["io.cridock.image"], "busybox:1", "a client without userSpecifiedImage: its image as given");
});

t.test("security context maps onto Docker options", async (t) => {
  const none = await securityHostConfig(security(), host);
  t.same(none.host.SecurityOpt, ["seccomp=unconfined"], "no profile is unconfined");
  const full = await securityHostConfig(
    security({ runAsUser: 1001n, runAsGroup: 1002n, supplementalGroups: [1234n], capAdd: ["NET_ADMIN"], capDrop: ["ALL"], noNewPrivs: true,
      readonlyRootfs: true, maskedPaths: ["/proc/kcore"], readonlyPaths: ["/tmp"], seccomp: { kind: "localhost", localhostRef: "/prof.json" },
      apparmor: { kind: "localhost", localhostRef: "loaded" } }),
    host,
  );
  t.equal(full.user, "1001:1002");
  t.same(full.host.GroupAdd, ["1234"]);
  t.same(full.host.CapDrop, ["ALL"]);
  t.same(full.host.SecurityOpt, ["no-new-privileges", 'seccomp={"defaultAction":"SCMP_ACT_ALLOW"}', "apparmor=loaded"]);
  t.same(full.host.MaskedPaths, ["/proc/kcore"]);
  t.equal(full.host.ReadonlyRootfs, true);
  t.same((await securityHostConfig(security({ seccomp: { kind: "runtime-default", localhostRef: "" } }), host)).host.SecurityOpt, undefined);
  const privileged = await securityHostConfig(security({ privileged: true, maskedPaths: ["/x"], seccomp: { kind: "localhost", localhostRef: "/missing" } }), host);
  t.equal(privileged.host.MaskedPaths, undefined);
  t.equal(privileged.host.SecurityOpt, undefined);
  await t.rejects(securityHostConfig(security({ seccomp: { kind: "localhost", localhostRef: "/missing" } }), host), /cannot read seccomp/);
  await t.rejects(securityHostConfig(security({ apparmor: { kind: "localhost", localhostRef: "absent" } }), host), /not loaded/);
  await t.rejects(
    securityHostConfig(security({ apparmor: { kind: "localhost", localhostRef: "p" } }), { ...host, apparmorProfiles: async () => undefined }),
    /not enabled/,
  );
  t.equal((await securityHostConfig(security({ runAsUsername: "nobody" }), host)).user, "nobody");
});

t.test("resources: swap follows memory; what Docker cannot do is refused by name", async (t) => {
  const r = { ...EMPTY_RESOURCES, memoryLimitInBytes: 15n * 1024n * 1024n, cpuShares: 512n, cpuQuota: 50000n, cpuPeriod: 100000n, oomScoreAdj: 100n, cpusetCpus: "0" };
  t.same(hostResources(r), { CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, Memory: 15728640, MemorySwap: 15728640, CpusetCpus: "0", OomScoreAdj: 100 });
  t.throws(() => hostResources({ ...r, hugepageLimits: [{ pageSize: "2MB", limit: 2097152n }] }), /hugepage_limits/);
  t.doesNotThrow(() => hostResources({ ...r, hugepageLimits: [{ pageSize: "2MB", limit: 0n }] }));
  t.throws(() => hostResources({ ...r, unified: { "memory.high": "1" } }, 1), /unified settings need cgroup v2; this node runs cgroup v1/);
  t.throws(() => updateFor({ ...r, oomScoreAdj: 5n }, { OomScoreAdj: 100 }), /oom_score_adj/);
  t.same(updateFor({ ...EMPTY_RESOURCES, cpuShares: 2n }, { OomScoreAdj: 100 }).docker, { CpuShares: 2 });
});

t.test("Docker state → CRI state and reason", async (t) => {
  t.equal(stateOf("running"), "running");
  t.equal(stateOf("created", 127), "exited");
  t.equal(stateOf("dead"), "exited");
  t.equal(stateOf("weird"), "unknown");
  const inspect = (state: Partial<ContainerInspect["State"]>) =>
    ({ State: { Status: "exited", Running: false, OOMKilled: false, ExitCode: 0, Error: "", StartedAt: "2024-01-01T00:00:00Z", FinishedAt: "2024-01-01T00:00:01Z", ...state } }) as ContainerInspect;
  t.same(reasonOf(inspect({ OOMKilled: true, ExitCode: 137 })), { reason: "OOMKilled", message: "" });
  t.equal(reasonOf(inspect({})).reason, "Completed");
  t.equal(reasonOf(inspect({ ExitCode: 2 })).reason, "Error");
  t.same(reasonOf(inspect({ Status: "created", ExitCode: 127, Error: "exec: nope", StartedAt: "0001-01-01T00:00:00Z" })), { reason: "ContainerCannotRun", message: "exec: nope" });
  const info = containerInfo({
    Id: "c".repeat(64), Name: "/k8s_app_pod_ns_u1_1", Created: "2024-01-01T00:00:00.000000001Z", Image: "sha256:abc",
    State: { Status: "exited", Running: false, Paused: false, Restarting: false, OOMKilled: false, Dead: false, Pid: 0, ExitCode: 0, Error: "", StartedAt: "2024-01-01T00:00:00.5Z", FinishedAt: "0001-01-01T00:00:00Z" },
    Config: { Image: "sha256:abc", Labels: { "io.kubernetes.docker.type": "container", "io.kubernetes.sandbox.id": view.id, "io.cridock.image": "busybox:1", "io.cridock.name": "app", "io.cridock.attempt": "1", "io.cridock.mounts": JSON.stringify([{ containerPath: "/d", hostPath: "/link" }]), x: "y", "annotation.k": "v" } },
    HostConfig: { Memory: 5 }, Mounts: [], NetworkSettings: {}, LogPath: "", ResolvConfPath: "", HostnamePath: "", HostsPath: "", RestartCount: 0, Driver: "", Path: "", Args: [],
  } as unknown as ContainerInspect);
  t.equal(info.createdAt, 1704067200000000001n);
  t.equal(info.finishedAt, 0n);
  t.same(info.labels, { x: "y" });
  t.same(info.annotations, { k: "v" });
  t.equal(info.image, "busybox:1");
  t.equal(info.imageId, "sha256:abc");
  t.equal(info.name, "app");
  t.equal(info.attempt, 1);
  t.equal(info.mounts[0]!.hostPath, "/link");
  t.equal(info.resources.memoryLimitInBytes, 5n);
});

t.test("a container whose start failed is exited, ContainerCannotRun, finished when it was created", async (t) => {
  const created = "2024-01-01T00:00:00.000000001Z";
  const failed = (state: Partial<ContainerInspect["State"]>) =>
    containerInfo({
      Id: "c".repeat(64), Name: "/k8s_app_pod_ns_u1_0", Created: created, Image: "sha256:abc",
      State: { Status: "created", Running: false, Paused: false, Restarting: false, OOMKilled: false, Dead: false, Pid: 0, ExitCode: 127, Error: 'exec: "/no/such": stat /no/such: no such file or directory', StartedAt: "0001-01-01T00:00:00Z", FinishedAt: "0001-01-01T00:00:00Z", ...state },
      Config: { Labels: { "io.kubernetes.docker.type": "container" } }, HostConfig: {},
    } as unknown as ContainerInspect);
  const info = failed({});
  t.equal(info.state, "exited");
  t.equal(info.exitCode, 127);
  t.equal(info.reason, "ContainerCannotRun");
  t.match(info.message, /no such file/);
  t.equal(info.finishedAt, 1704067200000000001n, "kubelet's backoff counts from finished_at: never 0");
  t.equal(info.startedAt, 1704067200000000001n);
  const notStarted = failed({ ExitCode: 0, Error: "" });
  t.equal(notStarted.state, "created", "created and not started yet stays CREATED");
  t.equal(notStarted.finishedAt, 0n);
  const summary = { Id: "c".repeat(64), Names: ["/k8s_app_pod_ns_u1_0"], Image: "busybox", ImageID: "sha256:abc", State: "created", Created: 1, Labels: {} };
  t.equal(summaryInfo(summary as never).state, "created");
  t.equal(summaryInfo(summary as never, true).state, "exited", "ListContainers agrees with ContainerStatus once the failure is known");
});
