import t from "tap";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CheckpointStore, CorruptCheckpointError } from "../../../../src/store/checkpoint.ts";
import { KeyedMutex } from "../../../../src/runtime/keyed-mutex.ts";
import { bandwidthFromAnnotations, parseQuantity, validateSandboxSpec, type SandboxSpec } from "../../../../src/runtime/sandbox/spec.ts";
import { dockerTimeToNanos, isReady, type SandboxRecord } from "../../../../src/runtime/sandbox/record.ts";
import { sandboxSpecFromCri } from "../../../../src/cri/sandbox-rpcs.ts";
import { sandboxCreateBody } from "../../../../src/runtime/sandbox/docker.ts";
import { NamespaceMode, ProfileType, Protocol } from "../../../../src/cri/proto-types.ts";
import { sandboxSpec } from "../../../helpers/sandbox-fixtures.ts";

function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return sandboxSpec({ logDirectory: "/var/log/pods/x", ...overrides });
}

t.test("checkpoint store is atomic JSON per key", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-ckpt-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = new CheckpointStore<{ n: number }>(join(dir, "sandbox"));
  t.same(await store.keys(), [], "a new store is empty");
  await store.write("abc", { n: 1 });
  await store.write("abc", { n: 2 });
  await store.write("def", { n: 3 });
  t.same(await store.read("abc"), { n: 2 }, "the last write wins");
  t.same(await store.keys(), ["abc", "def"]);
  t.same((await readdir(join(dir, "sandbox"))).sort(), ["abc.json", "def.json"], "no temp files stay");
  await writeFile(join(dir, "sandbox", ".ghi.1234.tmp"), "partial");
  await writeFile(join(dir, "sandbox", "bad.json"), "{ torn");
  t.same(await store.keys(), ["abc", "bad", "def"], "temp files left by a crash are cleaned up");
  await t.rejects(store.read("bad"), CorruptCheckpointError);
  await store.remove("abc");
  await store.remove("abc");
  t.equal(await store.read("abc"), undefined, "removal is idempotent");
  t.throws(() => store.pathOf("../escape"), /not a safe file name/);
});

t.test("keyed mutex serializes per key only", async (t) => {
  const mutex = new KeyedMutex();
  const events: string[] = [];
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  await Promise.all([
    mutex.run("a", async () => { events.push("a1 start"); await sleep(30); events.push("a1 end"); }),
    mutex.run("a", async () => { events.push("a2 start"); events.push("a2 end"); }),
    mutex.run("b", async () => { events.push("b start"); events.push("b end"); }),
  ]);
  t.ok(events.indexOf("a2 start") > events.indexOf("a1 end"), "same key waits");
  t.ok(events.indexOf("b start") < events.indexOf("a1 end"), "other keys do not");
  await t.rejects(mutex.run("a", async () => { throw new Error("x"); }), /x/);
  t.equal(await mutex.run("a", async () => 5), 5, "a failure releases the key");
  t.equal(mutex.size, 0, "idle keys are forgotten");
});

t.test("sandbox spec validation", async (t) => {
  t.doesNotThrow(() => validateSandboxSpec(spec()));
  // setHostnameAsFQDN on a node whose cluster domain is empty: kubelet's FQDN ends in a dot.
  t.doesNotThrow(() => validateSandboxSpec(spec({ hostname: "hostfqdn-31503.t.hostfqdn-7803.svc." })));
  const bad: [Partial<SandboxSpec>, RegExp][] = [
    [{ metadata: { name: "", namespace: "d", uid: "u", attempt: 0 } }, /metadata.name "" must not be empty/],
    [{ metadata: { name: "a_b", namespace: "d", uid: "u", attempt: 0 } }, /metadata.name "a_b" may only contain/],
    [{ metadata: { name: "x".repeat(300), namespace: "d", uid: "u", attempt: 0 } }, /at most 253/],
    [{ metadata: { name: "a", namespace: "", uid: "u", attempt: 0 } }, /metadata.namespace/],
    [{ metadata: { name: "a", namespace: "d", uid: "", attempt: 0 } }, /metadata.uid/],
    [{ hostname: "bad host" }, /hostname/],
    [{ hostname: "a.." }, /hostname/],
    [{ hostname: "." }, /hostname/],
    [{ dns: { servers: ["not-an-ip"], searches: [], options: [] } }, /not an IP address/],
    [{ portMappings: [{ protocol: "tcp", containerPort: 0, hostPort: 0, hostIp: "" }] }, /container_port 0/],
    [{ portMappings: [{ protocol: "tcp", containerPort: 80, hostPort: 70000, hostIp: "" }] }, /host_port 70000/],
    [{ portMappings: [{ protocol: "tcp", containerPort: 80, hostPort: 8080, hostIp: "" }, { protocol: "tcp", containerPort: 81, hostPort: 8080, hostIp: "" }] }, /twice/],
    [{ sysctls: { "bad key!": "1" } }, /sysctl/],
    [{ runtimeHandler: "bad handler" }, /runtime handler/],
    [{ logDirectory: "relative" }, /absolute/],
  ];
  for (const [overrides, message] of bad) {
    t.throws(() => validateSandboxSpec(spec(overrides)), message, String(message));
  }
});

t.test("bandwidth annotations and quantities", async (t) => {
  t.equal(parseQuantity("10M", "x"), 10_000_000);
  t.equal(parseQuantity("1Gi", "x"), 2 ** 30);
  t.throws(() => parseQuantity("ten", "x"), /not a quantity/);
  t.equal(bandwidthFromAnnotations({}), undefined);
  t.same(bandwidthFromAnnotations({ "kubernetes.io/ingress-bandwidth": "1M" }), { ingressRate: 1_000_000, ingressBurst: 2 ** 31 - 1 });
});

t.test("docker times and readiness", async (t) => {
  t.equal(dockerTimeToNanos("2024-05-06T07:08:09.123456789Z"), 1714979289123456789n);
  t.equal(dockerTimeToNanos("2024-05-06T07:08:09Z"), 1714979289000000000n);
  t.equal(dockerTimeToNanos("0001-01-01T00:00:00Z"), 0n);
  const record = { phase: "ready", hostNetwork: false, network: { phase: "attached", ips: ["10.0.0.2"] } } as SandboxRecord;
  t.ok(isReady(record, true));
  t.notOk(isReady(record, false), "a dead pause container is NOTREADY");
  t.notOk(isReady({ ...record, network: { ...record.network, ips: [] } }, true), "no IP, not READY");
  t.notOk(isReady({ ...record, phase: "creating" }, true), "not READY before RunPodSandbox returns");
  t.ok(isReady({ ...record, hostNetwork: true, network: { phase: "none", name: "", ips: [], result: null } }, true));
});

t.test("CRI config to spec to Docker body", async (t) => {
  const s = sandboxSpecFromCri({
    config: {
      metadata: { name: "web", namespace: "ns", uid: "u1", attempt: 2 },
      hostname: "h",
      dnsConfig: { servers: ["10.10.10.10"], searches: ["google.com"], options: ["ndots:8"] },
      portMappings: [{ protocol: Protocol.UDP, containerPort: 53, hostPort: 5353, hostIp: "" }],
      labels: { a: "1" },
      annotations: { b: "2" },
      linux: {
        cgroupParent: "/kubepods/pod1",
        sysctls: { "kernel.shm_rmid_forced": "1" },
        securityContext: {
          namespaceOptions: { network: NamespaceMode.POD, pid: NamespaceMode.NODE, ipc: NamespaceMode.POD },
          runAsUser: { value: 1000n },
          supplementalGroups: [5n],
          seccomp: { profileType: ProfileType.RuntimeDefault },
        },
      },
    },
    runtimeHandler: "",
  });
  t.same(s.metadata, { name: "web", namespace: "ns", uid: "u1", attempt: 2 });
  t.same(s.portMappings, [{ protocol: "udp", containerPort: 53, hostPort: 5353, hostIp: "" }]);
  t.equal(s.namespaces.pid, "node");
  t.equal(s.security.runAsUser, "1000");
  t.throws(() => sandboxSpecFromCri({ config: { hostname: "x" } }), /needs metadata/);
  t.throws(() => sandboxSpecFromCri({}), /needs a config/);

  const base = { image: "pause", rootDirectory: "/r", logMaxSize: "10m", logMaxFile: 2 };
  const cni = await sandboxCreateBody(s, { ...base, cgroupDriver: "systemd", networkKind: "cni" });
  t.equal(cni.HostConfig!.NetworkMode, "none", "CNI pods start without a network");
  t.equal(cni.HostConfig!.IpcMode, "shareable");
  t.equal(cni.HostConfig!.PidMode, "host");
  t.equal(cni.HostConfig!.CgroupParent, "pod1", "systemd driver gets the basename");
  t.same(cni.HostConfig!.Dns, ["10.10.10.10"]);
  t.same(cni.HostConfig!.DnsOptions, ["ndots:8"]);
  t.equal(cni.Hostname, "h");
  t.equal(cni.User, "1000");
  t.same(cni.HostConfig!.GroupAdd, ["5"]);
  t.notOk(cni.HostConfig!.PortBindings, "portmap publishes the ports, not Docker");
  t.equal(cni.Labels!["io.kubernetes.docker.type"], "podsandbox");
  t.equal(cni.Labels!["annotation.b"], "2");
  t.equal(cni.Labels!.a, "1");

  const docker = await sandboxCreateBody(s, { ...base, cgroupDriver: "cgroupfs", networkKind: "docker" });
  t.equal(docker.HostConfig!.CgroupParent, "/kubepods/pod1");
  t.same(docker.HostConfig!.PortBindings, { "53/udp": [{ HostIp: "", HostPort: "5353" }] });

  const host = await sandboxCreateBody({ ...s, namespaces: { ...s.namespaces, network: "node" } }, { ...base, cgroupDriver: "cgroupfs", networkKind: "cni" });
  t.equal(host.HostConfig!.NetworkMode, "host");
  t.notOk(host.Hostname, "host network pods keep the node's hostname");
});
