import t from "tap";
import { evaluate, exitCode, formatItems, mountOf, type NodeFacts } from "../../../src/check/evaluate.ts";

function goodFacts(): NodeFacts {
  return {
    runtime: { name: "node", version: "v26.12.1", v8: "14.6.202.33-node.21", path: "/usr/bin/cridock", selfContained: true },
    dockerEndpoint: "unix:///var/run/docker.sock",
    docker: { ok: true, version: "29.0.0", apiVersion: "1.52", cgroupDriver: "systemd", cgroupVersion: "2" },
    hostCgroupVersion: 2,
    cni: { plugin: "cni", confDir: "/etc/cni/net.d", binDirs: ["/opt/cni/bin"], config: { file: "/etc/cni/net.d/10-cridock.conflist", name: "cridock", plugins: ["bridge", "portmap"] }, problems: [], loopback: true },
    root: { path: "/var/lib/cridock", existing: "/var/lib", fsType: "ext4", mountPoint: "/", readOnly: false, writable: true, freeBytes: 10 * 1024 ** 3 },
    capabilities: { granted: ["CAP_CHOWN"], missing: [] },
    privileged: { tried: false, reason: "the bounding set is full" },
    oomScore: { restricted: false, hostRestricted: false, floor: 0, reason: "scores can be lowered" },
    ociLayer: { ready: true, runtime: "cridock", launcher: "/var/lib/cridock/oci-runtime", delegate: "/usr/sbin/runc" },
    checkpoint: { experimental: true, criu: "/usr/sbin/criu" },
    pause: { image: "registry.k8s.io/pause:3.10.2", present: true },
    streaming: { host: "127.0.0.1", port: 0, bindable: true },
    socket: { activated: false, path: "/var/run/cridock.sock", state: "absent", dirUsable: true },
  };
}

function item(facts: NodeFacts, name: string) {
  const found = evaluate(facts).find((i) => i.name === name);
  if (!found) throw new Error(`no item ${name}`);
  return found;
}

t.test("a good node: every item OK, exit 0, one line each", async (t) => {
  const items = evaluate(goodFacts());
  t.same(items.map((i) => i.name), ["runtime", "docker", "cgroup", "cni", "root-directory", "capabilities", "oom-score-adj", "oci-layer", "mount-options", "checkpoint", "pause-image", "streaming", "socket"]);
  t.ok(items.every((i) => i.verdict === "ok"), formatItems(items));
  t.equal(exitCode(items), 0);
  t.equal(formatItems(items).split("\n").length, items.length);
  t.match(item(goodFacts(), "cgroup").detail, /kubelet's --cgroup-driver .* must be systemd/);
});

t.test("what stops cridock from serving pods fails, with a fix", async (t) => {
  const cases: [string, (f: NodeFacts) => void, RegExp][] = [
    ["docker", (f) => (f.docker = { ok: false, error: "connect ENOENT" }), /start dockerd/],
    ["docker", (f) => (f.docker = { ok: true, version: "19.03", apiVersion: "1.40", cgroupDriver: "cgroupfs" }), /upgrade/],
    ["cni", (f) => (f.cni = { plugin: "cni", confDir: "/c", binDirs: ["/b"], problems: ["no network config found in /c"], loopback: true }), /conflist/],
    ["cni", (f) => (f.cni = { plugin: "cni", confDir: "/c", binDirs: ["/b"], problems: [], loopback: false }), /containernetworking-plugins/],
    ["root-directory", (f) => (f.root = { ...f.root, readOnly: true }), /writable/],
    ["root-directory", (f) => (f.root = { ...f.root, fsType: "proc", mountPoint: "/proc" }), /on a disk/],
    ["pause-image", (f) => (f.pause = { image: "x/pause:1", present: false, pullable: false, error: "manifest unknown" }), /docker pull/],
    ["streaming", (f) => (f.streaming = { host: "10.9.9.9", port: 1, bindable: false, error: "EADDRNOTAVAIL" }), /--streaming-bind-addr/],
    ["socket", (f) => (f.socket = { activated: false, path: "/run/x.sock", state: "not-socket", dirUsable: true }), /remove/],
    ["oom-score-adj", (f) => (f.oomScore = { restricted: false, hostRestricted: true, floor: 0, reason: "--restrict-oom-score-adj=false although the capability bounding set lacks CAP_SYS_RESOURCE" }), /restrict-oom-score-adj=false/],
    ["socket", (f) => (f.socket = { activated: false, path: "/ro/x.sock", state: "absent", dirUsable: false, dirError: "/ro is not writable" }), /writable directory/],
  ];
  for (const [name, change, fix] of cases) {
    const facts = goodFacts();
    change(facts);
    const it = item(facts, name);
    t.equal(it.verdict, "fail", `${name}: ${it.detail}`);
    t.match(it.fix ?? "", fix, `${name} says how to fix it`);
    t.equal(exitCode(evaluate(facts)), 1);
    t.match(formatItems(evaluate(facts)), new RegExp(`^FAIL ${name} .* — fix: `, "m"));
  }
});

t.test("limitations warn but do not fail", async (t) => {
  const cases: [string, (f: NodeFacts) => void][] = [
    ["capabilities", (f) => (f.capabilities = { granted: ["CAP_CHOWN"], missing: ["CAP_SYS_RESOURCE"] })],
    ["oom-score-adj", (f) => (f.oomScore = { restricted: true, hostRestricted: true, floor: 0, reason: "the capability bounding set lacks CAP_SYS_RESOURCE" })],
    ["cgroup", (f) => f.docker.ok && (f.docker.cgroupVersion = "1") && (f.hostCgroupVersion = 1)],
    ["root-directory", (f) => (f.root = { ...f.root, fsType: "nfs4" })],
    ["socket", (f) => (f.socket = { activated: false, path: "/run/x.sock", state: "live", mode: 0o140666, dirUsable: true })],
  ];
  for (const [name, change] of cases) {
    const facts = goodFacts();
    change(facts);
    t.equal(item(facts, name).verdict, "warn", `${name}: ${item(facts, name).detail}`);
    t.equal(exitCode(evaluate(facts)), 0);
  }
});

t.test("capabilities: the check says what the engine did with a privileged container", async (t) => {
  const restricted = (privileged: NodeFacts["privileged"]) => {
    const f = goodFacts();
    f.capabilities = { granted: ["CAP_CHOWN", "CAP_KILL"], missing: ["CAP_SYS_RESOURCE"] };
    f.privileged = privileged;
    return item(f, "capabilities");
  };
  const started = restricted({ tried: true, outcome: "started" });
  t.equal(started.verdict, "ok", "an engine that starts privileged containers here runs privileged pods");
  t.match(started.detail, /lacks CAP_SYS_RESOURCE: Docker 29\.0\.0 started a privileged container with the 2 capabilities the host has, so privileged pods run with those/);
  t.notMatch(started.detail, /refused/, "no word of refusal when the engine runs them");

  const refused = restricted({ tried: true, outcome: "refused", message: "unable to apply caps: operation not permitted" });
  t.equal(refused.verdict, "warn");
  t.match(refused.detail, /Docker 29\.0\.0 refused to start a privileged container \(unable to apply caps.*\): privileged pods fail with FAILED_PRECONDITION/);
  t.match(refused.fix ?? "", /current Docker Engine/);

  const untried = restricted({ tried: false, reason: "the pause image registry.k8s.io/pause:3.10.2 is not present" });
  t.equal(untried.verdict, "warn");
  t.match(untried.detail, /left to the engine.*not tried: the pause image/);

  const other = restricted({ tried: true, outcome: "error", message: "No such image" });
  t.equal(other.verdict, "warn");
  t.match(other.detail, /failed for another reason \(No such image\)/);
});

t.test("absent but pullable pause image, no-op network, fd:// socket are fine", async (t) => {
  const f = goodFacts();
  f.pause = { image: "registry.k8s.io/pause:3.10.2", present: false, pullable: true };
  f.cni = { plugin: "no-op" };
  f.socket = { activated: true };
  t.equal(exitCode(evaluate(f)), 0);
  t.match(item(f, "socket").detail, /SocketMode=0660/);
});

t.test("oci-layer: a cgroup v2 node without the layer warns with the command that registers it; v1 does not need it", async (t) => {
  const item = (facts: Partial<NodeFacts>) => evaluate({ ...goodFacts(), ...facts }).find((i) => i.name === "oci-layer")!;
  const absent = { ready: false as const, reason: 'dockerd has no runtime named "cridock"' };
  t.match(item({ ociLayer: absent }), { verdict: "warn", detail: /written after each container starts/, fix: "cridock oci-layer install" });
  const v1 = { ok: true as const, version: "20.10.24", apiVersion: "1.41", cgroupDriver: "cgroupfs", cgroupVersion: "1" };
  t.match(item({ ociLayer: absent, docker: v1 }), { verdict: "ok", detail: /not needed on cgroup v1/ });
  t.match(item({}), { verdict: "ok", detail: /in force before a container's first instruction/ });
});

t.test("mount-options: honoured with the layer; without it, on cgroup v1 too, a warning that says why and how to fix it", async (t) => {
  const item = (facts: Partial<NodeFacts>) => evaluate({ ...goodFacts(), ...facts }).find((i) => i.name === "mount-options")!;
  t.match(item({}), { verdict: "ok", detail: /noexec, nodev, nosuid\) are honoured.*declares mount_options/ });
  const absent = { ready: false as const, reason: 'dockerd has no runtime named "cridock"' };
  const v1 = { ok: true as const, version: "20.10.24", apiVersion: "1.41", cgroupDriver: "cgroupfs", cgroupVersion: "1" };
  for (const facts of [{ ociLayer: absent }, { ociLayer: absent, docker: v1 }]) {
    const it = item(facts);
    t.match(it, { verdict: "warn", detail: /cannot be honoured: dockerd has no runtime named "cridock"; .*kubelet refuses pods/, fix: "cridock oci-layer install" });
  }
  t.equal(exitCode(evaluate({ ...goodFacts(), ociLayer: absent })), 0, "a node without them still serves pods");
  t.match(item({ docker: { ok: false, error: "connect ENOENT" }, ociLayer: undefined }), { verdict: "warn", detail: /unknown/ });
});

t.test("checkpoint: served with experimental mode and criu; without either, a warning naming what is missing and how to add it", async (t) => {
  const item = (facts: Partial<NodeFacts>) => evaluate({ ...goodFacts(), ...facts }).find((i) => i.name === "checkpoint")!;
  t.match(item({}), { verdict: "ok", detail: /CheckpointContainer, CheckpointPod and RestorePod are served: .*criu is \/usr\/sbin\/criu/ });
  const neither = item({ checkpoint: { experimental: false } });
  t.match(neither, { verdict: "warn", detail: /answer UNIMPLEMENTED: dockerd runs without --experimental.*; criu is not installed/ });
  t.match(neither.fix, /"experimental": true in \/etc\/docker\/daemon.json.*; install criu/);
  t.match(item({ checkpoint: { experimental: true } }), { verdict: "warn", detail: /UNIMPLEMENTED: criu is not installed/ });
  t.equal(exitCode(evaluate({ ...goodFacts(), checkpoint: { experimental: false } })), 0, "a node without them still serves pods");
  t.match(item({ docker: { ok: false, error: "connect ENOENT" }, checkpoint: undefined }), { verdict: "warn", detail: /unknown/ });
});

t.test("mountOf finds the longest mount point holding a path", async (t) => {
  const mountinfo = [
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
    "23 22 0:5 / /proc rw,nosuid - proc proc rw",
    "24 22 0:20 / /var/lib rw,relatime - xfs /dev/sdb1 rw",
    "25 22 0:21 / /var/lib/ro\\040dir ro,relatime - ext4 /dev/sdc1 ro",
    "26 22 0:22 / /var/library rw - tmpfs tmpfs rw",
  ].join("\n");
  t.same(mountOf(mountinfo, "/var/lib/cridock"), { mountPoint: "/var/lib", fsType: "xfs", readOnly: false });
  t.same(mountOf(mountinfo, "/var/lib/ro dir/x"), { mountPoint: "/var/lib/ro dir", fsType: "ext4", readOnly: true });
  t.same(mountOf(mountinfo, "/var/libx"), { mountPoint: "/", fsType: "ext4", readOnly: false }, "a prefix of the name is not a parent");
  t.same(mountOf(mountinfo, "/proc/1"), { mountPoint: "/proc", fsType: "proc", readOnly: false });
  t.equal(mountOf("", "/x"), undefined);
});
