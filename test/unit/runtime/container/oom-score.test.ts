import t from "tap";
import { clampOomScore, decideOomScorePolicy, parseOomScoreFacts, type OomScoreFacts } from "../../../../src/runtime/container/oom-score.ts";
import { createBody } from "../../../../src/runtime/container/create.ts";
import { EMPTY_RESOURCES, updateFor } from "../../../../src/runtime/container/resources.ts";
import type { ContainerSpec } from "../../../../src/runtime/container/spec.ts";
import type { SandboxView } from "../../../../src/runtime/sandbox/view.ts";
import { sandboxCreateBody } from "../../../../src/runtime/sandbox/docker.ts";

/** /proc/self/status of this test host: every capability but CAP_SYS_RESOURCE (bit 24). */
const RESTRICTED_STATUS = "Name:\tnode\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n";
const FULL_STATUS = RESTRICTED_STATUS.replaceAll("000001fffeffffff", "000001ffffffffff");
const INITIAL_NS = "         0          0 4294967295\n";

t.test("the facts come from the bounding set, the uid map and the own score", async (t) => {
  t.same(parseOomScoreFacts(RESTRICTED_STATUS, "0\n", INITIAL_NS), { ownScore: 0, sysResourceInBoundingSet: false, inUserNamespace: false });
  t.same(parseOomScoreFacts(FULL_STATUS, "-500\n", INITIAL_NS), { ownScore: -500, sysResourceInBoundingSet: true, inUserNamespace: false });
  // A rootless runtime: its root is uid 1000 outside.
  t.same(parseOomScoreFacts(FULL_STATUS, "200", "0 1000 1\n1 100000 65536\n"), { ownScore: 200, sysResourceInBoundingSet: true, inUserNamespace: true });
  t.throws(() => parseOomScoreFacts("Name:\tx\n", "0", INITIAL_NS), /CapBnd/);
  t.throws(() => parseOomScoreFacts(FULL_STATUS, "-1001", INITIAL_NS), /-1000\.\.1000/);
  t.throws(() => parseOomScoreFacts(FULL_STATUS, "x", INITIAL_NS), /not an integer/);
});

t.test("auto restricts exactly when scores cannot be lowered; true and false force it", async (t) => {
  const free: OomScoreFacts = { ownScore: -500, sysResourceInBoundingSet: true, inUserNamespace: false };
  const noCap: OomScoreFacts = { ...free, sysResourceInBoundingSet: false };
  const userns: OomScoreFacts = { ...free, inUserNamespace: true };
  t.match(decideOomScorePolicy("auto", free), { restricted: false, hostRestricted: false, floor: -500 });
  t.match(decideOomScorePolicy("auto", noCap), { restricted: true, hostRestricted: true, floor: -500, reason: /CAP_SYS_RESOURCE/ });
  t.match(decideOomScorePolicy("auto", userns), { restricted: true, hostRestricted: true, reason: /user namespace/ });
  t.match(decideOomScorePolicy(true, free), { restricted: true, hostRestricted: false });
  t.match(decideOomScorePolicy(false, noCap), { restricted: false, hostRestricted: true, reason: /will fail to start/ });
});

t.test("the clamp raises scores below the floor only", async (t) => {
  const policy = decideOomScorePolicy("auto", { ownScore: 0, sysResourceInBoundingSet: false, inUserNamespace: false });
  t.equal(clampOomScore(-997, policy), 0, "Guaranteed and node-critical");
  t.equal(clampOomScore(-998, policy), 0, "cri-dockerd's sandbox score");
  t.equal(clampOomScore(0, policy), 0);
  t.equal(clampOomScore(1000, policy), 1000, "BestEffort keeps its higher score");
  t.equal(clampOomScore(-997, decideOomScorePolicy("auto", { ownScore: 0, sysResourceInBoundingSet: true, inUserNamespace: false })), -997);
  t.equal(clampOomScore(-997, undefined), -997);
});

const spec = (oomScoreAdj: bigint): ContainerSpec => ({
  name: "app", attempt: 0, image: "busybox", command: [], args: [], workingDir: "", envs: [], mounts: [], devices: [],
  cdiDevices: [], labels: {}, annotations: {}, logPath: "", stdin: false, stdinOnce: false, tty: false, stopSignal: "",
  resources: { ...EMPTY_RESOURCES, oomScoreAdj },
});
const view: SandboxView = {
  id: "f".repeat(64), metadata: { name: "pod", namespace: "ns", uid: "u1", attempt: 0 }, ready: true, pid: 1,
  logDirectory: "", cgroupParent: "", hostNetwork: false, hostPid: false, hostIpc: false,
  runtimeHandler: "", netnsPath: "", ips: [], sysctls: {}, privileged: false,
};
const engine = { apiVersion: "1.41", relabels: false, imageMountIds: new Map<string, string>() };

t.test("a container's Docker body carries the clamped score", async (t) => {
  const restricted = decideOomScorePolicy("auto", { ownScore: 0, sysResourceInBoundingSet: false, inUserNamespace: false });
  const raised = decideOomScorePolicy("auto", { ownScore: 300, sysResourceInBoundingSet: false, inUserNamespace: false });
  const body = async (score: bigint, oomScore = restricted) =>
    (await createBody(spec(score), view, "sha256:abc", "", { logMaxSize: "10m", logMaxFile: 2, oomScore }, engine)).HostConfig!.OomScoreAdj;
  t.equal(await body(-997n), undefined, "-997 becomes Docker's default 0");
  t.equal(await body(-997n, raised), 300);
  t.equal(await body(0n, raised), 300, "no score asked still gets the floor");
  t.equal(await body(1000n), 1000);
  const free = decideOomScorePolicy("auto", { ownScore: 0, sysResourceInBoundingSet: true, inUserNamespace: false });
  t.equal(await body(-997n, free), -997, "an unrestricted host gets kubelet's score");
});

t.test("a resize resending kubelet's score matches the clamped one", async (t) => {
  const restricted = decideOomScorePolicy("auto", { ownScore: 0, sysResourceInBoundingSet: false, inUserNamespace: false });
  const requested = { ...EMPTY_RESOURCES, cpuShares: 1024n, oomScoreAdj: -997n };
  t.same(updateFor(requested, { OomScoreAdj: 0 }, restricted).docker, { CpuShares: 1024 });
  t.throws(() => updateFor(requested, { OomScoreAdj: 0 }), /oom_score_adj cannot be changed/, "unrestricted: still refused");
});

t.test("the sandbox gets the floor only when it is above Docker's 0", async (t) => {
  const base = {
    image: "pause", cgroupDriver: "cgroupfs" as const, networkKind: "cni" as const, rootDirectory: "/r", logMaxSize: "1m", logMaxFile: 2,
  };
  const sandbox = {
    metadata: { name: "p", namespace: "n", uid: "u", attempt: 0 }, hostname: "", logDirectory: "", dns: undefined, portMappings: [],
    labels: {}, annotations: {}, cgroupParent: "", sysctls: {}, runtimeHandler: "",
    namespaces: { network: "pod", pid: "pod", ipc: "pod", targetId: "" },
    security: { privileged: false, readonlyRootfs: false, supplementalGroups: [], seccomp: { type: "runtime-default" } },
  } as unknown as Parameters<typeof sandboxCreateBody>[0];
  const at = async (ownScore: number) =>
    (await sandboxCreateBody(sandbox, { ...base, oomScore: decideOomScorePolicy("auto", { ownScore, sysResourceInBoundingSet: false, inUserNamespace: false }) }))
      .HostConfig!.OomScoreAdj;
  t.equal(await at(-500), undefined);
  t.equal(await at(0), undefined);
  t.equal(await at(250), 250);
});
