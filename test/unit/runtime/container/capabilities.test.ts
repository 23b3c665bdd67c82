import t from "tap";
import {
  CAPABILITY_NAMES,
  canonicalCapability,
  privilegedStartFailure,
  classifyCapabilities,
  expandAll,
  parseCapabilityMask,
  readHostCapabilities,
} from "../../../../src/runtime/container/capabilities.ts";
import { securityHostConfig, type HostSecurity } from "../../../../src/runtime/container/security.ts";
import type { SecuritySpec } from "../../../../src/runtime/container/spec.ts";
import { DockerError } from "../../../../src/docker/errors.ts";

t.test("the bit table matches linux/capability.h at its anchors", async (t) => {
  t.equal(CAPABILITY_NAMES.length, 41);
  t.equal(CAPABILITY_NAMES[0], "CHOWN");
  t.equal(CAPABILITY_NAMES[12], "NET_ADMIN");
  t.equal(CAPABILITY_NAMES[21], "SYS_ADMIN");
  t.equal(CAPABILITY_NAMES[24], "SYS_RESOURCE");
  t.equal(CAPABILITY_NAMES[31], "SETFCAP");
  t.equal(CAPABILITY_NAMES[37], "AUDIT_READ");
  t.equal(CAPABILITY_NAMES[40], "CHECKPOINT_RESTORE");
  t.equal(new Set(CAPABILITY_NAMES).size, CAPABILITY_NAMES.length, "no name twice");
});

t.test("a bounding set without CAP_SYS_RESOURCE", async (t) => {
  const host = classifyCapabilities(parseCapabilityMask("000001fffeffffff"), 40);
  t.same(host.missing, ["CAP_SYS_RESOURCE"]);
  t.equal(host.granted.length, 40);
  t.notOk(host.granted.includes("CAP_SYS_RESOURCE"));
  t.ok(host.granted.includes("CAP_CHECKPOINT_RESTORE"));
});

t.test("only capabilities the kernel has count", async (t) => {
  // A 5.4 kernel stops at CAP_AUDIT_READ (37): later bits are neither granted nor missing.
  const host = classifyCapabilities(parseCapabilityMask("0000003fffffffff"), 37);
  t.same(host.missing, []);
  t.equal(host.granted.at(-1), "CAP_AUDIT_READ");
  t.throws(() => parseCapabilityMask("xyz"), /not a capability mask/);
});

t.test("ALL becomes the grantable list only on a restricted host", async (t) => {
  const restricted = classifyCapabilities(parseCapabilityMask("000001fffeffffff"), 40);
  const full = classifyCapabilities(parseCapabilityMask("000001ffffffffff"), 40);
  t.same(expandAll(["ALL"], [], full), ["ALL"], "Docker's own ALL is right when nothing is missing");
  t.same(expandAll(["NET_ADMIN"], [], restricted), ["NET_ADMIN"], "named additions pass unchanged");
  const all = expandAll(["all"], [], restricted);
  t.same(all, restricted.granted.filter((c) => !["CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"].includes(c)), "names Docker 20.10 refuses are left out");
  t.ok(all.includes("CAP_SYS_ADMIN") && all.includes("CAP_AUDIT_READ"));
  const lessRaw = expandAll(["ALL", "net_admin"], ["NET_RAW"], restricted);
  t.notOk(lessRaw.includes("CAP_NET_RAW"), "a dropped capability is not added back");
  t.ok(lessRaw.includes("CAP_NET_ADMIN"));
  t.equal(lessRaw.length, all.length - 1, "no name twice");
  t.equal(canonicalCapability("sys_admin"), "CAP_SYS_ADMIN");
});

t.test("an engine's refusal to apply a privileged container's caps names what the host lacks", async (t) => {
  const restricted = classifyCapabilities(parseCapabilityMask("000001fffeffffff"), 40);
  const caps = new DockerError(500, "OCI runtime create failed: runc create failed: unable to start container process: unable to apply caps: operation not permitted: unknown", "start");
  const refused = privilegedStartFailure(caps, restricted, "pod sandbox ns/p");
  t.equal(refused?.code, "FAILED_PRECONDITION");
  t.match(refused?.message, /pod sandbox ns\/p is privileged.*CAP_SYS_RESOURCE/);
  t.equal(refused?.cause, caps, "Docker's error is kept as the cause");
  t.equal(privilegedStartFailure(new DockerError(500, "no such image", "start"), restricted, "x"), undefined, "other failures are left as they are");
  t.equal(privilegedStartFailure(new Error("unable to apply caps"), restricted, "x"), undefined, "only the engine's own answer counts");
});

t.test("the container's Docker config uses the host's capabilities", async (t) => {
  const restricted = classifyCapabilities(parseCapabilityMask("000001fffeffffff"), 40);
  const host: HostSecurity = {
    apparmorProfiles: async () => undefined,
    readSeccompProfile: async () => "{}",
    capabilities: async () => restricted,
  };
  const sc = (over: Partial<SecuritySpec>): SecuritySpec => ({
    privileged: false, capAdd: [], capDrop: [], capAddAmbient: [], pidMode: "pod", targetId: "",
    runAsUsername: "", readonlyRootfs: false, supplementalGroups: [], supplementalGroupsStrict: false,
    noNewPrivs: false, maskedPaths: [], readonlyPaths: [], ...over,
  });
  const cfg = await securityHostConfig(sc({ capAdd: ["ALL"] }), host);
  t.same(cfg.host.CapAdd, expandAll(["ALL"], [], restricted));
  t.notOk(cfg.host.CapAdd!.includes("CAP_SYS_RESOURCE"));
  const privileged = await securityHostConfig(sc({ privileged: true }), host);
  t.equal(privileged.host.Privileged, true, "privileged is left to the engine, whatever the host's bounding set");
});

t.test("this machine's own bounding set reads", async (t) => {
  const host = await readHostCapabilities();
  t.ok(host.granted.includes("CAP_CHOWN") || host.missing.includes("CAP_CHOWN"), "CAP_CHOWN is classified");
  t.equal(host.granted.length + host.missing.length >= 38, true, "every capability of a 4.x+ kernel is classified");
});
