// Workloads from the API server onto cridock: a Deployment's rollout,
// rolling update and rollback, a Job to completion, and a failing Job's
// back-off until its limit.
import t from "tap";
import { apply, getJson, kubectlOk, testNamespace, waitFor } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "workloads");

const deployment = (version: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "app" },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "app" } },
    strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
    template: {
      metadata: { labels: { app: "app" } },
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          {
            name: "app",
            image: BUSYBOX_IMAGE,
            command: ["sh", "-c", `echo version ${version}; trap 'exit 0' TERM; while :; do sleep 1; done`],
            env: [{ name: "VERSION", value: version }],
            readinessProbe: { exec: { command: ["true"] }, periodSeconds: 1 },
          },
        ],
      },
    },
  },
});

const rollout = () => kubectlOk(["-n", ns, "rollout", "status", "deployment/app", "--timeout=180s"], { timeoutMs: 200_000 });

/** The VERSION of every running pod of the Deployment. */
async function runningVersions(): Promise<string[]> {
  const pods = await getJson(["-n", ns, "pods", "-l", "app=app"]);
  return pods.items
    .filter((p: any) => p.status.phase === "Running" && !p.metadata.deletionTimestamp)
    .map((p: any) => p.spec.containers[0].env[0].value)
    .sort();
}

t.test("a Deployment rolls out, updates and rolls back", async (t) => {
  await apply(ns, deployment("one"));
  await rollout();
  t.same(await runningVersions(), ["one", "one"], "two replicas of the first version");

  await apply(ns, deployment("two"));
  await rollout();
  await waitFor("only version two running", async () => ((await runningVersions()).join() === "two,two" ? true : undefined));
  const history = await kubectlOk(["-n", ns, "rollout", "history", "deployment/app"]);
  t.match(history, /^1\s/m, "revision 1 in the history");
  t.match(history, /^2\s/m, "revision 2 in the history");

  await kubectlOk(["-n", ns, "rollout", "undo", "deployment/app"]);
  await rollout();
  await waitFor("version one running again", async () => ((await runningVersions()).join() === "one,one" ? true : undefined));
  const app = await getJson(["-n", ns, "deployment", "app"]);
  t.equal(app.metadata.annotations["deployment.kubernetes.io/revision"], "3", "the rollback is revision 3");
  t.equal(app.status.readyReplicas, 2);
});

t.test("a Job runs to completion", async (t) => {
  await apply(ns, {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: "done" },
    spec: {
      completions: 2,
      parallelism: 2,
      template: { spec: { restartPolicy: "Never", containers: [{ name: "work", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo worked"] }] } },
    },
  });
  await kubectlOk(["-n", ns, "wait", "--for=condition=Complete", "job/done", "--timeout=180s"], { timeoutMs: 200_000 });
  const job = await getJson(["-n", ns, "job", "done"]);
  t.equal(job.status.succeeded, 2);
  const logs = await kubectlOk(["-n", ns, "logs", "job/done"]);
  t.equal(logs, "worked\n");
});

t.test("a failing Job backs off and fails at its backoff limit", async (t) => {
  await apply(ns, {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: "fails" },
    spec: {
      backoffLimit: 2,
      template: { spec: { restartPolicy: "Never", containers: [{ name: "work", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo failing; exit 3"] }] } },
    },
  });
  await kubectlOk(["-n", ns, "wait", "--for=condition=Failed", "job/fails", "--timeout=240s"], { timeoutMs: 260_000 });
  const job = await getJson(["-n", ns, "job", "fails"]);
  const failed = job.status.conditions.find((c: any) => c.type === "Failed");
  t.equal(failed.reason, "BackoffLimitExceeded");
  t.equal(job.status.failed, 3, "the first try and two retries");
  const pods = await getJson(["-n", ns, "pods", "-l", "job-name=fails"]);
  const exits = pods.items.map((p: any) => p.status.containerStatuses[0].state.terminated?.exitCode);
  t.same(exits, [3, 3, 3], "each pod's container exited 3");
  // The Job controller waits between retries (10 s, then 20 s): the pods' starts are spread out.
  const starts = pods.items.map((p: any) => Date.parse(p.status.startTime)).sort((a: number, b: number) => a - b);
  t.ok(starts[2] - starts[0] >= 20_000, `retries backed off (${(starts[2] - starts[0]) / 1000} s from first to last)`);
});
