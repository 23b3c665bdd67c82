/**
 * The pod checkpoint's manifest (runtime/pod-checkpoint/manifest.ts) and
 * the container plans a restore makes from it (restore.ts containerPlans):
 * what cridock writes reads back the same; a manifest that is not one of
 * cridock's, or whose fields are of the wrong type or out of bounds, is
 * INVALID_ARGUMENT naming the field; a pod in its own user namespace is
 * refused; RestorePod's container configs replace the manifest's by name.
 */
import t from "tap";
import { buildManifest, parseManifest, containerMember, isContainerMember, MAX_CONTAINERS } from "../../../../src/runtime/pod-checkpoint/manifest.ts";
import { containerPlans } from "../../../../src/runtime/pod-checkpoint/restore.ts";
import type { ContainerSpec } from "../../../../src/runtime/container/spec.ts";
import { codeOf } from "../../../helpers/rejection.ts";
import { containerSpec, sandboxSpec } from "./fixtures.ts";

const manifest = () =>
  buildManifest("s".repeat(64), sandboxSpec(), [{ id: "a".repeat(64), spec: containerSpec("count") }, { id: "b".repeat(64), spec: containerSpec("side") }], new Date("2026-12-06T10:00:00Z"));

const parse = (value: unknown) => parseManifest(JSON.stringify(value), "/p.tar");
const refusal = (value: unknown) => codeOf(Promise.resolve().then(() => parse(value)));

t.test("what cridock writes reads back the same", async (t) => {
  const m = manifest();
  t.same(parse(m), m);
  t.equal(m.containers[1]!.archive, "containers/side.tar");
  t.ok(isContainerMember(containerMember("count")));
  t.notOk(isContainerMember("containers/a/b.tar"));
  t.notOk(isContainerMember("pod.json"));
});

t.test("a manifest that is not one, or with a bad field: INVALID_ARGUMENT naming it", async (t) => {
  const cases: [string, (m: any) => unknown, RegExp][] = [
    ["not JSON", () => undefined, /pod.json is not JSON/],
    ["a list", () => [], /\(the whole file\) is not a JSON object/],
    ["another kind", (m) => ({ ...m, kind: "other" }), /has kind "other"/],
    ["another version", (m) => ({ ...m, version: 2 }), /has version 2; this cridock reads version 1/],
    ["no containers", (m) => ({ ...m, containers: [] }), /containers is not a list of 1 to 64/],
    ["too many containers", (m) => ({ ...m, containers: Array.from({ length: MAX_CONTAINERS + 1 }, () => m.containers[0]) }), /containers is not a list/],
    ["a name with a slash", (m) => ((m.containers[0].name = "../x"), m), /containers\[0\]\.name "\.\.\/x" is not a container name/],
    ["an archive elsewhere", (m) => ((m.containers[0].archive = "../../etc/passwd"), m), /containers\[0\]\.archive is "\.\.\/\.\.\/etc\/passwd", not containers\/count\.tar/],
    ["a spec of another name", (m) => ((m.containers[0].spec.name = "other"), m), /containers\[0\]\.spec\.name is not count/],
    ["a name twice", (m) => ((m.containers[1] = m.containers[0]), m), /names container count twice/],
    ["a label not a string", (m) => ((m.containers[0].spec.labels.a = 1), m), /containers\[0\]\.spec\.labels\["a"\] is not a string/],
    ["a __proto__ label", (m) => JSON.parse(JSON.stringify(m).replace('"labels":{"app":"web"}', '"labels":{"__proto__":"x"}')), /sandbox\.spec\.labels has the key __proto__/],
    ["a NUL in a string", (m) => ((m.sandbox.spec.hostname = "a\u0000b"), m), /sandbox\.spec\.hostname is longer than .* or holds a NUL/],
    ["a negative attempt", (m) => ((m.sandbox.spec.metadata.attempt = -1), m), /sandbox\.spec\.metadata\.attempt is not a non-negative integer/],
    ["a bad namespace mode", (m) => ((m.sandbox.spec.namespaces.network = "host"), m), /sandbox\.spec\.namespaces\.network is not one of pod, container, node, target/],
    ["a bad protocol", (m) => ((m.sandbox.spec.portMappings[0].protocol = "icmp"), m), /portMappings\[0\]\.protocol is not tcp, udp or sctp/],
    ["a bad seccomp", (m) => ((m.sandbox.spec.security.seccomp = { type: "lax" }), m), /seccomp\.type is not unconfined, runtime-default or localhost/],
    ["a uid that is not decimal", (m) => ((m.sandbox.spec.security.runAsUser = "-1"), m), /runAsUser is not a decimal id/],
    ["a bad propagation", (m) => ((m.containers[0].spec.mounts[0].propagation = "shared"), m), /mounts\[0\]\.propagation is not one of/],
    ["a user namespace", (m) => ((m.sandbox.spec.userns = { uids: [], gids: [] }), m), /has a user namespace: a pod in its own user namespace cannot be restored/],
    ["an idmapped mount", (m) => ((m.containers[0].spec.mounts[0].idMappings = { uids: [], gids: [] }), m), /has idMappings/],
  ];
  for (const [what, change, reason] of cases) {
    const value = change(JSON.parse(JSON.stringify(manifest())));
    const err = value === undefined ? await codeOf(Promise.resolve().then(() => parseManifest("{", "/p.tar"))) : await refusal(value);
    t.equal(err.code, "INVALID_ARGUMENT", what);
    t.match(err.message, /^\/p\.tar is not a usable pod checkpoint archive: pod\.json/, `${what}: names the archive`);
    t.match(err.message, reason, what);
  }
});

t.test("container plans: the manifest's configs, or the request's by name; the archive as the image; checked as CreateContainer checks", async (t) => {
  const m = manifest();
  const archives = new Map([["count", "/w/0.tar"], ["side", "/w/1.tar"]]);
  const plans = containerPlans(["count", "side"], m, [], archives);
  t.same(plans.map((p) => [p.name, p.image]), [["count", "/w/0.tar"], ["side", "/w/1.tar"]]);
  const given = { ...containerSpec("side"), image: "placeholder", envs: [{ key: "MODE", value: "restored" }] } as ContainerSpec;
  t.same(containerPlans(["count", "side"], m, [given], archives)[1]!.envs, [{ key: "MODE", value: "restored" }], "the request's config for its name");
  const refused = async (f: () => unknown) => codeOf(Promise.resolve().then(f));
  t.match(await refused(() => containerPlans(["count", "side"], m, [{ ...given, name: "other" }], archives)), { code: "INVALID_ARGUMENT", message: /names container "other", which the checkpoint does not hold \(it holds count, side\)/ });
  t.match(await refused(() => containerPlans(["count", "side"], m, [given, given], archives)), { code: "INVALID_ARGUMENT", message: /names container side twice/ });
  const bad = JSON.parse(JSON.stringify(m));
  bad.containers[0].spec.logPath = "../../etc/x";
  t.match(await refused(() => containerPlans(["count", "side"], bad, [], archives)), { code: "INVALID_ARGUMENT", message: /log_path/ }, "a log path out of the pod's log directory");
});
