/**
 * Labels and annotations a request must not set (runtime/labels.ts
 * checkRequestLabels): cridock's io.cridock. namespace and the keys it
 * reads back as facts, refused as INVALID_ARGUMENT naming the key, on
 * RunPodSandbox and CreateContainer alike; what kubelet sends stays
 * accepted, and cridock still sets its own.
 */
import t, { type Test } from "tap";
import { CridockError } from "../../../src/errors.ts";
import { createBody, validateSpec } from "../../../src/runtime/container/create.ts";
import type { ContainerSpec } from "../../../src/runtime/container/spec.ts";
import { validateSandboxSpec, type SandboxSpec } from "../../../src/runtime/sandbox/spec.ts";
import { sandboxCreateBody } from "../../../src/runtime/sandbox/docker.ts";
import type { SandboxView } from "../../../src/runtime/sandbox/view.ts";
import { checkRequestLabels, ROOT_LABEL, TYPE_LABEL } from "../../../src/runtime/labels.ts";
import { sandboxSpec } from "../../helpers/sandbox-fixtures.ts";

const container = (over: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name: "app", attempt: 1, image: "busybox", command: [], args: [], workingDir: "", envs: [], mounts: [], devices: [],
  cdiDevices: [], labels: {}, annotations: {}, logPath: "app/1.log", stdin: false, stdinOnce: false, tty: false, stopSignal: "", ...over,
});
const sandbox = (over: Partial<SandboxSpec> = {}): SandboxSpec => sandboxSpec({ logDirectory: "/var/log/pods/x", ...over });

/** What kubelet sends (pkg/kubelet/kuberuntime labels.go): these must stay accepted. */
const KUBELET_LABELS = {
  "io.kubernetes.pod.name": "web",
  "io.kubernetes.pod.namespace": "default",
  "io.kubernetes.pod.uid": "0f0e",
  "io.kubernetes.container.name": "app",
  app: "web",
};
const KUBELET_ANNOTATIONS = {
  "io.kubernetes.container.hash": "1234",
  "io.kubernetes.container.restartCount": "0",
  "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
  "io.kubernetes.pod.terminationGracePeriod": "30",
  "kubernetes.io/config.source": "api",
};

const REFUSED_LABELS = [
  "io.cridock.scratch",
  "io.cridock.root",
  "io.cridock.userns",
  "io.cridock.unified",
  "io.cridock.",
  "io.kubernetes.docker.type",
  "io.kubernetes.sandbox.id",
  "io.kubernetes.container.logpath",
];
const REFUSED_ANNOTATIONS = ["io.cridock.userns", "io.cridock.restore-from", "io.cridock.x"];

function refusedWith(t: Test, fn: () => void, key: string): void {
  try {
    fn();
    t.fail(`${key} was accepted`);
  } catch (err) {
    t.ok(err instanceof CridockError && err.code === "INVALID_ARGUMENT", `${key}: INVALID_ARGUMENT`);
    t.ok((err as Error).message.includes(JSON.stringify(key).slice(1, -1)), `the message names ${key}: ${(err as Error).message}`);
  }
}

t.test("RunPodSandbox: io.cridock. labels and annotations and cridock's read-back label keys are refused, naming the key", async (t) => {
  for (const key of REFUSED_LABELS) refusedWith(t, () => validateSandboxSpec(sandbox({ labels: { ok: "1", [key]: "v" } })), key);
  for (const key of REFUSED_ANNOTATIONS) refusedWith(t, () => validateSandboxSpec(sandbox({ annotations: { [key]: "v" } })), key);
  t.doesNotThrow(() => validateSandboxSpec(sandbox({ labels: KUBELET_LABELS, annotations: KUBELET_ANNOTATIONS })), "kubelet's own keys are accepted");
  t.doesNotThrow(() => validateSandboxSpec(sandbox({ annotations: { "io.kubernetes.docker.type": "x" } })), "an annotation of a read-back name is stored apart (annotation.<key>) and accepted");
  t.doesNotThrow(() => validateSandboxSpec(sandbox({ labels: { "io.cridockx": "1", "cridock.io/x": "1", "xio.cridock.y": "1" } })), "only the io.cridock. prefix itself is reserved");
});

t.test("CreateContainer: the same keys are refused, kubelet's accepted", async (t) => {
  for (const key of REFUSED_LABELS) refusedWith(t, () => validateSpec(container({ labels: { [key]: "v" } })), key);
  for (const key of REFUSED_ANNOTATIONS) refusedWith(t, () => validateSpec(container({ annotations: { [key]: "v" } })), key);
  t.doesNotThrow(() => validateSpec(container({ labels: KUBELET_LABELS, annotations: KUBELET_ANNOTATIONS })));
});

t.test("a hostile key is named escaped and clipped", async (t) => {
  const key = `io.cridock.${"\n".repeat(3)}${"x".repeat(500)}`;
  try {
    checkRequestLabels("pod sandbox", { [key]: "v" }, {});
    t.fail("accepted");
  } catch (err) {
    const message = (err as Error).message;
    t.notOk(message.includes("\n"), "no raw newline in the message");
    t.ok(message.length < 400, `clipped (${message.length} characters)`);
  }
});

t.test("cridock's own labels are still set by cridock", async (t) => {
  const s = sandbox({ labels: KUBELET_LABELS });
  validateSandboxSpec(s);
  const body = await sandboxCreateBody(s, { image: "pause", cgroupDriver: "systemd", networkKind: "cni", rootDirectory: "/var/lib/cridock", logMaxSize: "10m", logMaxFile: 2 });
  t.equal(body.Labels?.[TYPE_LABEL], "podsandbox");
  t.equal(body.Labels?.[ROOT_LABEL], "/var/lib/cridock");
  t.equal(body.Labels?.["io.kubernetes.pod.name"], "web", "kubelet's labels are carried");
  const view: SandboxView = {
    id: "f".repeat(64), metadata: { name: "pod", namespace: "ns", uid: "u1", attempt: 0 }, ready: true, pid: 1,
    logDirectory: "/var/log/pods/ns_pod_u1", cgroupParent: "/kubepods", hostNetwork: false, hostPid: false, hostIpc: false,
    runtimeHandler: "", netnsPath: "", ips: [], sysctls: {}, privileged: false,
  };
  const c = container({ labels: KUBELET_LABELS, annotations: KUBELET_ANNOTATIONS });
  validateSpec(c);
  const cbody = await createBody(c, view, "sha256:abc", "", { logMaxSize: "10m", logMaxFile: 2, rootDirectory: "/var/lib/cridock" }, { apiVersion: "1.41", relabels: false, imageMountIds: new Map() });
  t.equal(cbody.Labels?.[TYPE_LABEL], "container");
  t.equal(cbody.Labels?.["io.kubernetes.sandbox.id"], "f".repeat(64));
  t.equal(cbody.Labels?.["io.cridock.name"], "app");
  t.equal(cbody.Labels?.[ROOT_LABEL], "/var/lib/cridock");
  t.equal(cbody.Labels?.["annotation.io.kubernetes.container.hash"], "1234");
});
