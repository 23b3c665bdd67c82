// Pod lifecycles the API drives on cridock: init and sidecar containers,
// graceful deletion with a preStop hook, probes as the API reports them, a
// DaemonSet (on a one-node cluster: two-nodes.test.ts checks it on two), and
// a StatefulSet behind a headless Service.
import t from "tap";
import { readFile, rm } from "node:fs/promises";
import { apply, getJson, kubectl, kubectlOk, testNamespace, waitFor, waitPodReady, DNS_DOMAIN } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE, HTTPD_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "lifecycle");
const idle = (before = "") => ["sh", "-c", `${before}trap 'exit 0' TERM; while :; do sleep 1; done`];

t.test("init containers run in order, and a sidecar starts before the app and keeps running", async (t) => {
  const shared = [{ name: "shared", mountPath: "/shared" }];
  await apply(ns, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "init" },
    spec: {
      terminationGracePeriodSeconds: 1,
      volumes: [{ name: "shared", emptyDir: {} }],
      initContainers: [
        { name: "first", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo first >> /shared/order"], volumeMounts: shared },
        // restartPolicy Always makes an init container a sidecar: it starts in order and stays up beside the app.
        { name: "sidecar", image: BUSYBOX_IMAGE, restartPolicy: "Always", command: idle("echo sidecar >> /shared/order; "), volumeMounts: shared },
      ],
      containers: [{ name: "app", image: BUSYBOX_IMAGE, command: idle("echo app >> /shared/order; "), volumeMounts: shared }],
    },
  });
  const pod = await waitPodReady(ns, "init");
  t.equal(await kubectlOk(["-n", ns, "exec", "init", "-c", "app", "--", "cat", "/shared/order"]), "first\nsidecar\napp\n");
  const inits = Object.fromEntries(pod.status.initContainerStatuses.map((c: any) => [c.name, c]));
  t.equal(inits.first.state.terminated?.reason, "Completed");
  t.ok(inits.sidecar.state.running, "the sidecar runs");
  t.equal(inits.sidecar.started, true);
});

t.test("graceful deletion runs the preStop hook, then SIGTERM", async (t) => {
  await apply(ns, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "graceful" },
    spec: {
      terminationGracePeriodSeconds: 30,
      volumes: [{ name: "out", hostPath: { path: `/tmp/cridock-cluster-${ns}`, type: "DirectoryOrCreate" } }],
      containers: [
        {
          name: "app",
          image: BUSYBOX_IMAGE,
          command: ["sh", "-c", "trap 'echo term >> /out/events; exit 0' TERM; while :; do sleep 1; done"],
          lifecycle: { preStop: { exec: { command: ["sh", "-c", "echo prestop >> /out/events; sleep 1"] } } },
          volumeMounts: [{ name: "out", mountPath: "/out" }],
        },
      ],
    },
  });
  await waitPodReady(ns, "graceful");
  const started = Date.now();
  await kubectlOk(["-n", ns, "delete", "pod", "graceful", "--wait=true", "--timeout=60s"], { timeoutMs: 70_000 });
  const took = Date.now() - started;
  const events = await readFile(`/tmp/cridock-cluster-${ns}/events`, "utf8");
  await rm(`/tmp/cridock-cluster-${ns}`, { recursive: true, force: true });
  t.equal(events, "prestop\nterm\n", "the hook ran first, then the container got SIGTERM");
  t.ok(took < 25_000, `the pod went in ${took} ms, well before its 30 s grace period`);
});

t.test("probes as the API reports them: readiness gates Ready, a failing liveness probe restarts", async (t) => {
  await apply(ns, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "probed" },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "ready-later",
          image: BUSYBOX_IMAGE,
          command: idle(),
          readinessProbe: { exec: { command: ["test", "-f", "/tmp/ready"] }, periodSeconds: 1 },
        },
        {
          name: "dies",
          image: HTTPD_IMAGE,
          livenessProbe: { httpGet: { path: "/missing", port: 80 }, periodSeconds: 1, failureThreshold: 2 },
        },
      ],
    },
  });
  await waitFor("pod probed to run", async () => ((await getJson(["-n", ns, "pod", "probed"])).status.phase === "Running" ? true : undefined));
  let pod = await getJson(["-n", ns, "pod", "probed"]);
  const ready = (p: any, name: string) => p.status.containerStatuses.find((c: any) => c.name === name).ready;
  t.equal(ready(pod, "ready-later"), false, "not ready before its probe passes");
  await kubectlOk(["-n", ns, "exec", "probed", "-c", "ready-later", "--", "touch", "/tmp/ready"]);
  pod = await waitFor("ready-later to be ready", async () => {
    const p = await getJson(["-n", ns, "pod", "probed"]);
    return ready(p, "ready-later") ? p : undefined;
  }, 30_000);
  t.pass("ready once its probe passes");
  const restarted = await waitFor("the liveness restart", async () => {
    const p = await getJson(["-n", ns, "pod", "probed"]);
    const c = p.status.containerStatuses.find((c: any) => c.name === "dies");
    return c.restartCount >= 1 ? c : undefined;
  }, 60_000);
  t.ok(restarted.lastState.terminated, "the killed run is the last state");
  const events = await kubectlOk(["-n", ns, "get", "events", "--field-selector", "involvedObject.name=probed", "-o", "jsonpath={range .items[*]}{.reason}{\" \"}{.message}{\"\\n\"}{end}"]);
  t.match(events, /Unhealthy .*Liveness probe failed: HTTP probe failed with statuscode: 404/);
});

const nodeCount = (await getJson(["nodes"])).items.length;

t.test("a DaemonSet runs its pod on the node", { skip: nodeCount > 1 && "two nodes: two-nodes.test.ts checks the DaemonSet on each" }, async (t) => {
  await apply(ns, {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "everywhere" },
    spec: {
      selector: { matchLabels: { app: "everywhere" } },
      template: { metadata: { labels: { app: "everywhere" } }, spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "c", image: BUSYBOX_IMAGE, command: idle() }] } },
    },
  });
  await kubectlOk(["-n", ns, "rollout", "status", "daemonset/everywhere", "--timeout=120s"], { timeoutMs: 130_000 });
  const ds = await getJson(["-n", ns, "daemonset", "everywhere"]);
  t.equal(ds.status.desiredNumberScheduled, 1);
  t.equal(ds.status.numberReady, 1);
});

t.test("a StatefulSet's pods have stable names resolved through a headless Service", async (t) => {
  await apply(
    ns,
    { apiVersion: "v1", kind: "Service", metadata: { name: "db" }, spec: { clusterIP: "None", selector: { app: "db" }, ports: [{ port: 80 }] } },
    {
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name: "db" },
      spec: {
        serviceName: "db",
        replicas: 2,
        selector: { matchLabels: { app: "db" } },
        template: { metadata: { labels: { app: "db" } }, spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "web", image: HTTPD_IMAGE, ports: [{ containerPort: 80 }] }] } },
      },
    },
  );
  await kubectlOk(["-n", ns, "rollout", "status", "statefulset/db", "--timeout=180s"], { timeoutMs: 190_000 });
  for (const ordinal of [0, 1]) {
    const pod = await getJson(["-n", ns, "pod", `db-${ordinal}`]);
    const name = `db-${ordinal}.db.${ns}.svc.${DNS_DOMAIN}`;
    const answer = await waitFor(`${name} to resolve`, async () => {
      const res = await kubectl(["-n", ns, "exec", "db-0", "--", "nslookup", name]);
      return res.code === 0 && res.stdout.includes(pod.status.podIP) ? res.stdout : undefined;
    }, 60_000);
    t.match(answer, pod.status.podIP, `${name} is db-${ordinal}'s IP`);
  }
});
