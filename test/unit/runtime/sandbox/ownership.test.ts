import t from "tap";
import { isOwnSandbox } from "../../../../src/runtime/sandbox/queries.ts";

const ROOT = "/var/lib/cridock";
const labelled = (name: string, labels: Record<string, string> = {}) => ({
  Names: [`/${name}`],
  Labels: { "io.kubernetes.docker.type": "podsandbox", ...labels },
});

t.test("ListPodSandbox keeps to Kubernetes sandboxes of this runtime", async (t) => {
  t.ok(isOwnSandbox(labelled("k8s_POD_web_default_u1_0", { "io.cridock.root": ROOT }), ROOT, false), "cridock's, this root");
  t.ok(isOwnSandbox(labelled("k8s_POD_web_default_u1_0"), ROOT, false), "cri-dockerd's (no root label): a node switching runtimes keeps it");
  t.ok(isOwnSandbox(labelled("k8s_POD_web_default_u1_0_1a2b3c4d"), ROOT, false), "cri-dockerd's random-suffixed name");
  t.notOk(isOwnSandbox(labelled("k8s_POD_web_default_u1_0", { "io.cridock.root": "/srv/other" }), ROOT, false), "another cridock's");
  t.notOk(isOwnSandbox(labelled("my-tool-sidecar"), ROOT, false), "the type label on a container with no sandbox name");
  t.notOk(isOwnSandbox(labelled("k8s_app_web_default_u1_0"), ROOT, false), "a workload container's name is not a sandbox's");
  t.ok(isOwnSandbox(labelled("renamed"), ROOT, true), "one with a checkpoint here is ours whatever its name");
});
