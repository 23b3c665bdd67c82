/**
 * ListPodSandbox with no filter is what `kubeadm reset` stops and removes
 * one by one, and what kubelet kills as orphans: it must hold the
 * Kubernetes sandboxes of this runtime only. Beside cridock's own pod, the
 * engine gets a plain `docker run` container, a container that merely
 * carries the sandbox type label, another cridock's pause container (its
 * root label) with a container in it, and a cri-dockerd-style pause
 * container (sandbox name, no root label), which a node switching from
 * cri-dockerd must keep seeing.
 */
import t from "tap";
import { randomBytes } from "node:crypto";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { assertNoLeaks, docker, podConfig, removePod, runPod, startSandboxEnv } from "./helpers.ts";

t.test("only Kubernetes sandboxes of this runtime are listed", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  const { id: own } = await runPod(env, podConfig("own"));
  const tag = randomBytes(4).toString("hex");
  const created: string[] = [];
  t.teardown(() => {
    for (const id of created) docker("rm", "-f", id);
  });
  const create = (name: string, ...labels: string[]) => {
    const id = docker("create", "--network", "none", "--name", name, ...labels.flatMap((l) => ["--label", l]), BUSYBOX_IMAGE, "sleep", "3600");
    created.push(id);
    return id;
  };
  const plain = docker("run", "-d", "--network", "none", "--name", `cridock-plain-${tag}`, BUSYBOX_IMAGE, "sleep", "3600");
  created.push(plain);
  const labelOnly = create(`cridock-tool-${tag}`, "io.kubernetes.docker.type=podsandbox");
  const otherRoot = create(`k8s_POD_other_ns_uid-${tag}_0`, "io.kubernetes.docker.type=podsandbox", "io.cridock.root=/nonexistent/other-cridock");
  const otherContainer = create(
    `k8s_app_other_ns_uid-${tag}_0`,
    "io.kubernetes.docker.type=container",
    `io.kubernetes.sandbox.id=${otherRoot}`,
    "io.cridock.root=/nonexistent/other-cridock",
  );
  const criDockerd = create(`k8s_POD_legacy_ns_uid-${tag}_0`, "io.kubernetes.docker.type=podsandbox", "io.kubernetes.pod.name=legacy");

  const listed = (await client.call("ListPodSandbox", {})).items.map((s: { id: string }) => s.id) as string[];
  t.ok(listed.includes(own), "cridock's own pod");
  t.ok(listed.includes(criDockerd), "a cri-dockerd pod (sandbox name, no cridock root)");
  t.notOk(listed.includes(plain), "not a plain docker run container");
  t.notOk(listed.includes(labelOnly), "not a container that only carries the sandbox type label");
  t.notOk(listed.includes(otherRoot), "not another cridock's pod");
  const containers = (await client.call("ListContainers", {})).containers.map((c: { id: string }) => c.id) as string[];
  t.notOk(containers.includes(otherContainer), "nor another cridock's container");
  t.notOk(containers.includes(plain), "nor a plain container");
  const legacy = (await client.call("PodSandboxStatus", { podSandboxId: criDockerd })).status;
  t.same(legacy.metadata, { name: "legacy", namespace: "ns", uid: `uid-${tag}`, attempt: 0 }, "the cri-dockerd pod is described from its name");

  await removePod(env, own);
  await assertNoLeaks(t, env);
});
