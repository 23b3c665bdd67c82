import t from "tap";
import { applySpecEdits, applyUserns, bindMountsAt, parseSpecEdits } from "../../../src/oci/spec-edits.ts";

t.test("parseSpecEdits takes the known shape only", async (t) => {
  t.same(parseSpecEdits('{"version":1,"unified":{"memory.oom.group":"1","memory.swap.max":"0"}}'), {
    version: 1,
    unified: { "memory.oom.group": "1", "memory.swap.max": "0" },
  });
  t.same(parseSpecEdits('{"version":1}'), { version: 1 });
  t.throws(() => parseSpecEdits("not json"), /not JSON/);
  t.throws(() => parseSpecEdits("[]"), /not a JSON object/);
  t.throws(() => parseSpecEdits('{"version":2}'), /version 2 is not 1/);
  t.throws(() => parseSpecEdits('{"version":1,"process":{}}'), /carry process, which this layer does not know/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":[]}'), /unified is not an object/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"../memory.max":"1"}}'), /not a cgroup v2 interface file name/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"cgroup.procs":"1"}}'), /not a cgroup v2 interface file name/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":"1\\n2"}}'), /one line/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":5}}'), /one line/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":""}}'), /one line/);
});

t.test("applySpecEdits merges unified into linux.resources, keeping everything else", async (t) => {
  const spec = { ociVersion: "1.0.2", process: { args: ["sh"] }, linux: { resources: { memory: { limit: 1 }, unified: { "memory.high": "5", "memory.max": "9" } }, namespaces: [] } };
  const out = applySpecEdits(structuredClone(spec), { version: 1, unified: { "memory.oom.group": "1", "memory.max": "7" } });
  t.same(out, { ...spec, linux: { ...spec.linux, resources: { memory: { limit: 1 }, unified: { "memory.high": "5", "memory.max": "7", "memory.oom.group": "1" } } } });
  t.same(applySpecEdits({}, { version: 1, unified: { "memory.oom.group": "1" } }), { linux: { resources: { unified: { "memory.oom.group": "1" } } } });
  t.same(applySpecEdits({ a: 1 }, { version: 1 }), { a: 1 }, "no edits, no change");
  t.throws(() => applySpecEdits([], { version: 1 }), /not a JSON object/);
  t.throws(() => applySpecEdits({ linux: "x" }, { version: 1, unified: { "memory.max": "1" } }), /linux field/);
});

t.test("parseSpecEdits takes bind mount options: absolute destinations, noexec/nodev/nosuid once each", async (t) => {
  t.same(parseSpecEdits('{"version":1,"mountOptions":[{"destination":"/data","options":["noexec","nosuid","nodev"]}]}'), {
    version: 1,
    mountOptions: [{ destination: "/data", options: ["noexec", "nosuid", "nodev"] }],
  });
  const refused: [string, RegExp][] = [
    ['{"version":1,"mountOptions":{}}', /mountOptions is not a list/],
    ['{"version":1,"mountOptions":["/data"]}', /entry is not an object/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":["noexec"],"source":"/"}]}', /carries source, which this layer does not know/],
    ['{"version":1,"mountOptions":[{"destination":"data","options":["noexec"]}]}', /not an absolute path/],
    ['{"version":1,"mountOptions":[{"destination":"/a/../etc","options":["noexec"]}]}', /without "\.\." segments/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":[]}]}', /not a non-empty list/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":["exec"]}]}', /"exec" is not one of noexec, nodev, nosuid/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":["rw"]}]}', /"rw" is not one of/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":[1]}]}', /"1" is not one of/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":["noexec","noexec"]}]}', /"noexec" is given twice/],
    ['{"version":1,"mountOptions":[{"destination":"/data","options":["noexec"]},{"destination":"/data/","options":["nodev"]}]}', /name \/data\/ twice/],
  ];
  for (const [text, why] of refused) t.throws(() => parseSpecEdits(text), why, text);
});

/** A spec as Docker writes it: its own mounts, and kubelet's volumes as rbind mounts with their propagation and ro. */
function dockerSpec() {
  return {
    ociVersion: "1.2.0",
    root: { path: "/var/lib/docker/overlay2/abc/merged" },
    mounts: [
      { destination: "/proc", type: "proc", source: "proc", options: ["nosuid", "noexec", "nodev"] },
      { destination: "/etc/hosts", type: "bind", source: "/var/lib/kubelet/pods/u/etc-hosts", options: ["rbind", "rprivate"] },
      { destination: "/data", type: "bind", source: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/data", options: ["rbind", "rprivate"] },
      { destination: "/config", type: "bind", source: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~configmap/cfg", options: ["rbind", "ro", "rslave"] },
      { destination: "/shared", type: "bind", source: "/mnt/shared", options: ["rbind", "rshared", "exec"] },
    ],
  };
}

t.test("applySpecEdits adds each mount's options to that mount alone, beside ro and propagation", async (t) => {
  const out = applySpecEdits(dockerSpec(), {
    version: 1,
    mountOptions: [
      { destination: "/data", options: ["noexec", "nosuid", "nodev"] },
      { destination: "/config/", options: ["nodev"] },
      { destination: "/shared", options: ["noexec"] },
    ],
  });
  const byPath = Object.fromEntries(out.mounts!.map((m) => [m.destination, m.options]));
  t.same(byPath["/data"], ["rbind", "rprivate", "noexec", "nosuid", "nodev"]);
  t.same(byPath["/config"], ["rbind", "ro", "rslave", "nodev"], "read-only and propagation kept; a trailing slash names the same mount");
  t.same(byPath["/shared"], ["rbind", "rshared", "noexec"], "exec, which would undo noexec in runc's order, is taken out");
  t.same(byPath["/etc/hosts"], ["rbind", "rprivate"], "other mounts untouched");
  t.same(byPath["/proc"], ["nosuid", "noexec", "nodev"]);
  t.same(out.root, dockerSpec().root);
  const again = applySpecEdits(structuredClone(out), { version: 1, mountOptions: [{ destination: "/data", options: ["noexec"] }] });
  t.same(again.mounts![2]!.options, ["rbind", "rprivate", "nosuid", "nodev", "noexec"], "an option already there is not doubled");
});

t.test("a mount the spec lacks, or one that is not a bind, fails the edit: never started without the options", async (t) => {
  t.throws(() => applySpecEdits(dockerSpec(), { version: 1, mountOptions: [{ destination: "/missing", options: ["noexec"] }] }), /no mount at \/missing, to which the options noexec/);
  t.throws(() => applySpecEdits({ ociVersion: "1.2.0" }, { version: 1, mountOptions: [{ destination: "/data", options: ["noexec"] }] }), /no mount at \/data/);
  t.throws(() => applySpecEdits(dockerSpec(), { version: 1, mountOptions: [{ destination: "/proc", options: ["nodev"] }] }), /mounts \/proc as proc, not a bind mount/);
  const bad = dockerSpec();
  (bad.mounts[2] as { options: unknown }).options = "rbind";
  t.throws(() => applySpecEdits(bad, { version: 1, mountOptions: [{ destination: "/data", options: ["nodev"] }] }), /not a list/);
});

t.test("an idmapped volume of a user-namespaced pod keeps its options: both edits compose", async (t) => {
  const edits = {
    version: 1 as const,
    mountOptions: [{ destination: "/data", options: ["noexec" as const, "nosuid" as const] }],
    userns: { uids: [{ containerId: 0, hostId: 65536, length: 65536 }], gids: [{ containerId: 0, hostId: 65536, length: 65536 }], join: true, idmapMounts: ["/data", "/config"] },
  };
  // edit-command.ts's order: applySpecEdits, then the idmapped binds are made from that spec, then applyUserns.
  const spec = applySpecEdits(dockerSpec(), edits);
  const indexes = bindMountsAt(spec, edits.userns.idmapMounts);
  t.same(indexes, [2, 3], "the mounts to idmap are found after the options were added");
  const prepared = { rootPath: "/run/cridock-rootfs/c/m", mountSources: new Map(indexes.map((i) => [i, `/run/cridock-rootfs/c/v${i}`])), joinPath: "/proc/42/ns/user" };
  const out = applyUserns(spec, edits.userns, prepared);
  t.same(out.mounts![2], { destination: "/data", type: "bind", source: "/run/cridock-rootfs/c/v2", options: ["rbind", "rprivate", "noexec", "nosuid"] });
  t.same(out.mounts![3], { destination: "/config", type: "bind", source: "/run/cridock-rootfs/c/v3", options: ["rbind", "ro", "rslave"] });
  t.same(out.root, { path: "/run/cridock-rootfs/c/m" });
});
