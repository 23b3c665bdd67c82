// Volumes kubelet builds and cridock mounts: ConfigMap (and its update
// reaching a running pod), Secret, a projected service-account token,
// emptyDir shared between containers, and the downward API.
import t from "tap";
import { apply, kubectl, kubectlOk, testNamespace, waitFor, waitPodReady } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "volumes");
const idle = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"];

await apply(
  ns,
  { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" }, data: { greeting: "hello" } },
  { apiVersion: "v1", kind: "Secret", metadata: { name: "creds" }, stringData: { password: "s3cret" } },
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "vols", labels: { tier: "test" }, annotations: { note: "downward" } },
    spec: {
      terminationGracePeriodSeconds: 1,
      volumes: [
        { name: "config", configMap: { name: "settings" } },
        { name: "secret", secret: { secretName: "creds", defaultMode: 0o400 } },
        {
          name: "token",
          projected: { sources: [{ serviceAccountToken: { path: "token", expirationSeconds: 3600, audience: "cridock-test" } }] },
        },
        { name: "scratch", emptyDir: {} },
        {
          name: "podinfo",
          downwardAPI: {
            items: [
              { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
              { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
              { path: "mem-limit", resourceFieldRef: { containerName: "main", resource: "limits.memory", divisor: "1Mi" } },
            ],
          },
        },
      ],
      containers: [
        {
          name: "main",
          image: BUSYBOX_IMAGE,
          command: idle,
          resources: { limits: { memory: "64Mi" } },
          env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
          volumeMounts: [
            { name: "config", mountPath: "/config" },
            { name: "secret", mountPath: "/secret" },
            { name: "token", mountPath: "/token" },
            { name: "scratch", mountPath: "/scratch" },
            { name: "podinfo", mountPath: "/podinfo" },
          ],
        },
        { name: "writer", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo from-writer > /shared/note; trap 'exit 0' TERM; while :; do sleep 1; done"], volumeMounts: [{ name: "scratch", mountPath: "/shared" }] },
      ],
    },
  },
);
const pod = await waitPodReady(ns, "vols");

const inPod = (script: string) => kubectlOk(["-n", ns, "exec", "vols", "-c", "main", "--", "sh", "-c", script]);

t.test("a ConfigMap volume, and its update reaching the running pod", async (t) => {
  t.equal(await inPod("cat /config/greeting"), "hello");
  await kubectlOk(["-n", ns, "patch", "configmap", "settings", "--type=merge", "-p", JSON.stringify({ data: { greeting: "updated" } })]);
  // kubelet resyncs the volume on its next sync of the pod (about a minute at most, by its sync period plus cache TTL).
  const seen = await waitFor("the updated ConfigMap in the pod", async () => {
    const res = await kubectl(["-n", ns, "exec", "vols", "-c", "main", "--", "cat", "/config/greeting"]);
    return res.stdout === "updated" ? res.stdout : undefined;
  }, 150_000, 2000);
  t.equal(seen, "updated");
});

t.test("a Secret volume with its mode", async (t) => {
  t.equal(await inPod("cat /secret/password"), "s3cret");
  t.equal(await inPod("stat -L -c %a /secret/password"), "400\n");
});

t.test("a projected service-account token for the audience asked", async (t) => {
  const token = await inPod("cat /token/token");
  const payload = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8"));
  t.same(payload.aud, ["cridock-test"]);
  t.equal(payload["kubernetes.io"].pod.name, "vols");
  t.equal(payload["kubernetes.io"].namespace, ns);
});

t.test("an emptyDir shared between the pod's containers", async (t) => {
  t.equal(await inPod("cat /scratch/note"), "from-writer\n");
});

t.test("the downward API: labels, annotations, a resource limit and the pod IP", async (t) => {
  t.match(await inPod("cat /podinfo/labels"), 'tier="test"');
  t.match(await inPod("cat /podinfo/annotations"), 'note="downward"');
  t.equal(await inPod("cat /podinfo/mem-limit"), "64");
  t.equal(await inPod("echo $POD_IP"), `${pod.status.podIP}\n`);
});
