import t from "tap";
import { containerName, invalidNamePart, parseName, sandboxName } from "../../src/runtime/naming.ts";
import { fromDockerLabels, matchesSelector, toDockerLabels, TYPE_LABEL } from "../../src/runtime/labels.ts";

const pod = { name: "web", namespace: "default", uid: "1b4e28ba-2fa1-11d2-883f-0016d3cca427" };

t.test("names are cri-dockerd's", async (t) => {
  t.equal(sandboxName(pod, 0), "k8s_POD_web_default_1b4e28ba-2fa1-11d2-883f-0016d3cca427_0");
  t.equal(containerName({ name: "nginx", attempt: 2 }, pod), "k8s_nginx_web_default_1b4e28ba-2fa1-11d2-883f-0016d3cca427_2");
});

t.test("names parse back, with or without slash and random suffix", async (t) => {
  t.same(parseName("/" + sandboxName(pod, 3)), { containerName: "POD", pod, attempt: 3, isSandbox: true });
  // cri-dockerd's random-suffixed form (cridock never makes it).
  const randomized = `${containerName({ name: "app", attempt: 1 }, pod)}_1a2b3c4d`;
  t.same(parseName(randomized), { containerName: "app", pod, attempt: 1, isSandbox: false });
  t.equal(parseName("/nginx"), undefined, "a plain docker container is not ours");
  t.equal(parseName("k8s_a_b_c_d_x"), undefined, "the attempt must be a number");
  t.equal(parseName("k8s_a_b_c_d_1_2_3"), undefined, "too many parts");
});

t.test("name parts that would break the name are refused", async (t) => {
  t.equal(invalidNamePart("web-0.x"), undefined);
  t.match(invalidNamePart(""), /empty/);
  t.match(invalidNamePart("a_b"), /only contain/);
  t.match(invalidNamePart("../x"), /only contain/);
  t.match(invalidNamePart("x".repeat(254)), /253/);
});

t.test("labels: CRI labels and annotations round-trip; internal labels stay internal", async (t) => {
  const docker = toDockerLabels({ app: "web", "io.kubernetes.pod.uid": pod.uid }, { "checksum/config": "abc" }, { [TYPE_LABEL]: "container", "io.cridock.image": "busybox" });
  t.same(docker, {
    app: "web",
    "io.kubernetes.pod.uid": pod.uid,
    "annotation.checksum/config": "abc",
    [TYPE_LABEL]: "container",
    "io.cridock.image": "busybox",
  });
  const split = fromDockerLabels(docker, false);
  t.same(split.labels, { app: "web", "io.kubernetes.pod.uid": pod.uid });
  t.same(split.annotations, { "checksum/config": "abc" });
  t.same(split.internal, { [TYPE_LABEL]: "container", "io.cridock.image": "busybox" });
  t.throws(() => toDockerLabels({}, {}, { app: "x" }), /not an internal label/);
});

t.test("the sandbox's container-name label is internal only on sandboxes", async (t) => {
  const docker = { "io.kubernetes.container.name": "POD", a: "b" };
  t.same(fromDockerLabels(docker, true).labels, { a: "b" });
  t.same(fromDockerLabels(docker, false).labels, docker);
});

t.test("label selectors are AND-ed exact matches", async (t) => {
  const labels = { foo: "bar", x: "y" };
  t.ok(matchesSelector(labels, undefined));
  t.ok(matchesSelector(labels, {}));
  t.ok(matchesSelector(labels, { foo: "bar" }));
  t.ok(matchesSelector(labels, { foo: "bar", x: "y" }));
  t.notOk(matchesSelector(labels, { foo: "baz" }));
  t.notOk(matchesSelector(labels, { foo: "bar", missing: "" }));
});
