// kubectl's streams through the API server and kubelet to cridock's
// streaming server: exec (with and without a TTY), logs, logs --previous,
// port-forward and cp, each over WebSocket (kubectl's default) and over
// SPDY. kubelet 1.36 turns WebSocket into SPDY toward the runtime.
import t from "tap";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apply, getJson, kubectl, kubectlOk, kubectlSpawn, KUBECONFIG, KUBECTL, run, testNamespace, TRANSPORTS, waitFor, waitPodReady } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE, HTTPD_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "streams");
const scratch = await mkdtemp(join(tmpdir(), "cridock-cluster-cp-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

await apply(
  ns,
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "shell" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "sh", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo started; trap 'exit 0' TERM; while :; do sleep 1; done"] }] },
  },
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "httpd", image: HTTPD_IMAGE, ports: [{ containerPort: 80 }] }] },
  },
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "restarts" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "once", image: BUSYBOX_IMAGE, command: ["sh", "-c", "echo run-$(cat /proc/sys/kernel/random/uuid); sleep 2; exit 1"] }] },
  },
);
await waitPodReady(ns, "shell");
await waitPodReady(ns, "web");

t.test("logs of a running container", async (t) => {
  t.equal(await kubectlOk(["-n", ns, "logs", "shell"]), "started\n");
});

t.test("logs --previous of a restarted container", async (t) => {
  await waitFor("a restart of pod restarts", async () => {
    const pod = await getJson(["-n", ns, "pod", "restarts"]);
    return (pod.status.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? true : undefined;
  }, 120_000);
  const previous = await kubectlOk(["-n", ns, "logs", "restarts", "--previous"]);
  t.match(previous, /^run-[0-9a-f-]{36}\n$/, "the previous run's one line");
  const current = await kubectl(["-n", ns, "logs", "restarts"]);
  t.not(current.stdout, previous, "the current run's log is another file");
});

for (const transport of TRANSPORTS) {
  t.test(`over ${transport.name}`, async (t) => {
    const env = transport.env;

    t.test("exec without a TTY: stdout, stderr, stdin and the exit code", async (t) => {
      const res = await kubectl(["-n", ns, "exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 7"], { env });
      t.equal(res.code, 7, "kubectl exits with the command's code");
      t.equal(res.stdout, "out\n");
      t.match(res.stderr, "err\n");
      const echoed = await kubectl(["-n", ns, "exec", "-i", "shell", "--", "cat"], { env, input: "through stdin\n" });
      t.equal(echoed.code, 0, echoed.stderr);
      t.equal(echoed.stdout, "through stdin\n");
    });

    t.test("exec with a TTY", async (t) => {
      // script(1) gives kubectl a terminal, so -t is honoured; the remote side sees a pty on stdin and stdout.
      const command = `${KUBECTL} --kubeconfig ${KUBECONFIG} -n ${ns} exec -it shell -- sh -c 'tty; test -t 0 && test -t 1 && echo both-ttys'`;
      const res = await run("script", ["-qec", command, "/dev/null"], { env, input: "" });
      t.equal(res.code, 0, res.stderr);
      t.match(res.stdout, /\/dev\/pts\/\d+/, "a pty in the container");
      t.match(res.stdout, "both-ttys", "stdin and stdout are the terminal");
    });

    t.test("port-forward", async (t) => {
      const child = kubectlSpawn(["-n", ns, "port-forward", "pod/web", ":80"], env);
      t.teardown(() => void child.kill("SIGTERM"));
      let out = "";
      child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
      const port = await waitFor("port-forward to listen", async () => /Forwarding from 127\.0\.0\.1:(\d+) -> 80/.exec(out)?.[1], 30_000, 200);
      for (let i = 0; i < 3; i++) {
        const res = await run("curl", ["-sf", "--max-time", "10", `http://127.0.0.1:${port}/`]);
        t.equal(res.code, 0, `request ${i + 1}: ${res.stderr}`);
        t.match(res.stdout, "cridock test httpd", `request ${i + 1} reached httpd`);
      }
    });

    t.test("cp into the pod and back", async (t) => {
      const local = join(scratch, `${transport.name}-in.txt`);
      const content = `copied over ${transport.name}\n`.repeat(2000);
      await writeFile(local, content);
      await kubectlOk(["-n", ns, "cp", local, `shell:/tmp/${transport.name}.txt`], { env });
      t.equal(await kubectlOk(["-n", ns, "exec", "shell", "--", "wc", "-c", `/tmp/${transport.name}.txt`]), `${content.length} /tmp/${transport.name}.txt\n`);
      const back = join(scratch, `${transport.name}-out.txt`);
      await kubectlOk(["-n", ns, "cp", `shell:/tmp/${transport.name}.txt`, back], { env });
      t.equal(await readFile(back, "utf8"), content);
    });
  });
}
