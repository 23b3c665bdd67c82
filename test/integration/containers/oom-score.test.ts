/**
 * oom_score_adj as kubelet asks for it, on this host: Guaranteed and
 * node-critical pods get -997. Where no process may lower its score (no
 * CAP_SYS_RESOURCE in the bounding set, as on the CI host), runc refused to
 * start such containers; cridock now raises the score to its own, and a
 * cridock told not to (--restrict-oom-score-adj=false) shows the refusal.
 */
import t from "tap";
import { readFile } from "node:fs/promises";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { readOomScoreFacts } from "../../../src/runtime/container/oom-score.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, status, type Harness } from "./harness.ts";

// cridock is a child of this process: same bounding set, user namespace and score.
const facts = await readOomScoreFacts();
const hostRestricted = !facts.sysResourceInBoundingSet || facts.inUserNamespace;
const KUBELET_CRITICAL = -997;
const expected = hostRestricted ? Math.max(KUBELET_CRITICAL, facts.ownScore) : KUBELET_CRITICAL;
t.comment(`host can lower scores: ${!hostRestricted}; own score ${facts.ownScore}; -997 becomes ${expected}`);

const h = await startHarness();
t.teardown(() => h.close());

const MiB = 1024n * 1024n;
/** What kubelet sends for a Guaranteed pod's container (limits = requests). */
const guaranteed = {
  cpuPeriod: 100_000n, cpuQuota: 20_000n, cpuShares: 204n, memoryLimitInBytes: 64n * MiB, oomScoreAdj: BigInt(KUBELET_CRITICAL),
};
/** A system-node-critical pod is -997 whatever its QoS: here Burstable (requests, no memory limit). */
const nodeCritical = { cpuPeriod: 100_000n, cpuShares: 102n, oomScoreAdj: BigInt(KUBELET_CRITICAL) };

async function scoreOf(pid: number): Promise<number> {
  return Number((await readFile(`/proc/${pid}/oom_score_adj`, "utf8")).trim());
}

async function pidOf(h: Harness, id: string): Promise<number> {
  const verbose = await h.client.call("ContainerStatus", { containerId: id, verbose: true });
  return JSON.parse(verbose.info.info).pid as number;
}

for (const [kind, resources] of [["Guaranteed", guaranteed], ["node-critical", nodeCritical]] as const) {
  t.test(`a ${kind} pod's container starts with score ${expected}`, async (t) => {
    // kubelet also puts the pod's resources on the sandbox config.
    const pod = await runPod(h, { linux: { resources: { ...resources } } });
    t.teardown(() => removePod(h, pod.podSandboxId));
    const id = await createContainer(h, pod, containerConfig("app", ["sleep", "3600"], { linux: { resources } }));
    await h.client.call("StartContainer", { containerId: id });
    const s = await status(h, id);
    t.equal(s.state, 1, "RUNNING");
    t.equal(s.resources.linux.oomScoreAdj, BigInt(expected), "ContainerStatus reports the score in force");
    t.equal(await scoreOf(await pidOf(h, id)), expected, "the process has it");
    const sandbox = await h.client.call("PodSandboxStatus", { podSandboxId: pod.podSandboxId, verbose: true });
    t.ok((await scoreOf(JSON.parse(sandbox.info.info).pid)) >= Math.min(0, facts.ownScore), "the pause process is not below the floor either");
    // kubelet resends -997 with every resize of the pod.
    await h.client.call("UpdateContainerResources", { containerId: id, linux: { ...resources, cpuShares: 256n } });
    t.equal((await status(h, id)).resources.linux.cpuShares, 256n, "a resize resending -997 is accepted");
  });
}

t.test("a score above the floor is kept as asked", async (t) => {
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));
  const score = Math.max(facts.ownScore, 0) + 500;
  const id = await createContainer(h, pod, containerConfig("besteffort", ["sleep", "3600"], { linux: { resources: { oomScoreAdj: BigInt(score) } } }));
  await h.client.call("StartContainer", { containerId: id });
  t.equal(await scoreOf(await pidOf(h, id)), score);
});

t.test("--restrict-oom-score-adj=false on this host: what kubelet met before", { skip: hostRestricted ? false : "this host can lower scores" }, async (t) => {
  const unrestricted = await startHarness(["--restrict-oom-score-adj=false"]);
  t.teardown(() => unrestricted.close());
  const pod = await runPod(unrestricted);
  const id = await createContainer(unrestricted, pod, containerConfig("app", ["sleep", "3600"], { linux: { resources: guaranteed } }));
  const err = await unrestricted.client.call("StartContainer", { containerId: id }).catch((e) => e);
  t.ok(err?.code !== undefined && err.code !== grpcStatus.OK, `the start is refused: ${err?.details}`);
  // runc 1.1+ names the cause; the older runc of Debian's 20.10 only says its child died
  // ("can't get final child's PID from pipe: EOF").
  t.match(String(err.details), /oom_score_adj.*permission denied|final child's PID from pipe/i, "runc cannot lower the score");
  t.match(unrestricted.cridock.logs(), /oom_score_adj restriction forced off/);
  await removePod(unrestricted, pod.podSandboxId);
  t.same(await leakedContainers(unrestricted), []);
});

t.test("the start-up log says so once", async (t) => {
  const lines = h.cridock.logs().split("\n").filter((l) => l.includes("oom_score_adj is restricted"));
  t.equal(lines.length, hostRestricted ? 1 : 0, lines.join("\n"));
});

t.test("no container is left behind", async (t) => {
  t.same(await leakedContainers(h), []);
});
