/**
 * The pure parts of a pod's user namespace on Docker: kubelet's mappings
 * checked and carried into the OCI spec, util-linux's idmap option and
 * /proc's uid_map, the rootfs overlay read back from mountinfo, the node's
 * answer to "can you", and CRI's userns_options.
 */
import t from "tap";
import { HOST_RESERVED_IDS, highestMappedId, idmapMountOption, mappingProblem, overlappingMapping, procMapMatches, sameMappings, type UsernsMappings } from "../../../src/oci/id-mappings.ts";
import { mountAt, mountsUnder, overlayLayers, parseMountinfo } from "../../../src/mountinfo.ts";
import { applyUserns, bindMountsAt, parseSpecEdits, type OciSpec } from "../../../src/oci/spec-edits.ts";
import { judgeUserns, utilLinuxVersion } from "../../../src/oci/userns-support.ts";
import { usernsFromCri } from "../../../src/cri/userns-options.ts";
import { NamespaceMode } from "../../../src/cri/proto-types.ts";
import { CridockError } from "../../../src/errors.ts";
import type { OciLayer } from "../../../src/oci/layer.ts";
import { checkPodUserns, idmappedMounts, usernsClash } from "../../../src/runtime/pod-userns.ts";
import type { SandboxView } from "../../../src/runtime/sandbox/view.ts";
import type { MountSpec } from "../../../src/runtime/container/spec.ts";

/** The gRPC code and message a call threw ("none" when it did not). */
function code(f: () => unknown): string {
  try {
    f();
    return "none";
  } catch (err) {
    return err instanceof CridockError ? `${err.code} ${err.message}` : String(err);
  }
}

/** What kubelet sends: one range of 65536 ids at a multiple of 65536. */
const KUBELET: UsernsMappings = { uids: [{ containerId: 0, hostId: 65536 * 7, length: 65536 }], gids: [{ containerId: 0, hostId: 65536 * 7, length: 65536 }] };

const H = 65536 * 3;

t.test("mappings: kubelet's pass; the host's own ids, overlaps, an unmapped pod root, empty and out-of-range ones do not", async (t) => {
  t.equal(mappingProblem("uid", KUBELET.uids), undefined);
  t.match(mappingProblem("uid", []), /no uid mapping/);
  t.match(mappingProblem("gid", [{ containerId: 0, hostId: 0, length: 65536 }]), /maps onto the host's own gids \(0-65535\)/);
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: 1000, length: 100000 }]), /maps onto the host's own uids/, "critest's 1000: a person's uid on most hosts");
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: 65535, length: 65536 }]), /host's own uids/, "the last reserved id");
  t.equal(mappingProblem("uid", [{ containerId: 0, hostId: HOST_RESERVED_IDS, length: 65536 }]), undefined, "the first id kubelet may give");
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 65536 }, { containerId: 65536, hostId: 65534, length: 1 }]), /host's own uids/, "a second line onto nobody");
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 0 }]), /length of at least 1/);
  t.match(mappingProblem("uid", [{ containerId: -1, hostId: H, length: 1 }]), /not container id/);
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: 2 ** 32 - 10, length: 65536 }]), /reaches past the last id/);
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 10 }, { containerId: 5, hostId: H + 5000, length: 10 }]), /container ranges overlap/);
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 10 }, { containerId: 10, hostId: H + 5, length: 10 }]), /host ranges overlap/);
  t.equal(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 10 }, { containerId: 10, hostId: H + 10, length: 10 }]), undefined, "adjacent is fine");
  t.match(mappingProblem("gid", [{ containerId: 1, hostId: H, length: 100000 }]), /no gid mapping starts at container gid 0/, "critest: container id 0 must be mapped");
  t.match(mappingProblem("uid", [{ containerId: 0, hostId: H, length: 100000 }, { containerId: 0, hostId: H + 1000, length: 100000 }]), /container ranges overlap/, "critest: two mappings of the same ids");
  t.match(mappingProblem("uid", Array.from({ length: 341 }, (_, i) => ({ containerId: i, hostId: H + i, length: 1 }))), /kernel's 340/);
});

t.test("a pod's host ids are its own: another live pod's overlapping ones are refused, naming it", async (t) => {
  const other = (hostId: number, length = 65536): UsernsMappings => ({ uids: [{ containerId: 0, hostId, length }], gids: [{ containerId: 0, hostId, length }] });
  t.same(overlappingMapping(KUBELET, other(65536 * 8)), undefined, "the next range is free");
  t.match(overlappingMapping(KUBELET, other(65536 * 8 - 1, 2)), { what: "uid" }, "one id in common is an overlap");
  t.same(overlappingMapping(KUBELET, { uids: other(65536).uids, gids: KUBELET.gids })?.what, "gid", "gids are checked too");
  const holders = [
    { sandboxId: "b".repeat(64), pod: "default/web", podUid: "uid-web", mappings: KUBELET },
    { sandboxId: "", pod: "default/db", podUid: "uid-db", mappings: other(65536 * 9) },
  ];
  t.equal(usernsClash(KUBELET, "uid-web", holders), undefined, "another attempt of the same pod shares its ids");
  const clash = usernsClash(other(65536 * 7 + 100, 10), "uid-new", holders);
  t.equal(clash?.code, "INVALID_ARGUMENT");
  t.match(clash?.message, /host uids 458852-458861 overlap host uids 458752-524287 of pod default\/web \(sandbox bbbbbbbbbbbb\)/);
  t.match(usernsClash(other(65536 * 9), "uid-new", holders)?.message, /of pod default\/db \(being created\)/, "a pod still being created holds its ids");
  t.equal(usernsClash(other(65536 * 10), "uid-new", holders), undefined);
});

t.test("mappings travel as util-linux's idmap option and are recognised in /proc's uid_map", async (t) => {
  t.equal(idmapMountOption(KUBELET), "u:0:458752:65536 g:0:458752:65536");
  t.ok(procMapMatches("         0     458752      65536\n", KUBELET.uids));
  t.notOk(procMapMatches("         0          0 4294967295\n", KUBELET.uids), "the host's own namespace is not the pod's");
  t.notOk(procMapMatches("", KUBELET.uids));
  t.ok(sameMappings(KUBELET, structuredClone(KUBELET)));
  t.notOk(sameMappings(KUBELET, { ...KUBELET, gids: [{ containerId: 0, hostId: 65536, length: 65536 }] }));
  t.equal(highestMappedId(KUBELET.gids), 65535);
});

t.test("the edits' userns is checked like kubelet's request", async (t) => {
  const edit = { ...KUBELET, join: false, idmapMounts: ["/data"] };
  t.same(parseSpecEdits(JSON.stringify({ version: 1, userns: edit })), { version: 1, userns: edit });
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, uids: [{ containerId: 0, hostId: 0, length: 1 }] } })), /host's own uids/);
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, gids: [{ containerId: 0, hostId: 1000, length: 65536 }] } })), /host's own gids/, "the layer checks the host's ids too");
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, join: "yes" } })), /join is not true or false/);
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, idmapMounts: ["rel"] } })), /not an absolute path/);
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, extra: 1 } })), /carries extra/);
  t.throws(() => parseSpecEdits(JSON.stringify({ version: 1, userns: { ...edit, uids: "0:1:2" } })), /not lists/);
});

const dockerSpec = (): OciSpec => ({
  root: { path: "/var/lib/docker/overlay2/abc/merged", readonly: false },
  mounts: [
    { destination: "/proc", type: "proc", source: "proc" },
    { destination: "/etc/resolv.conf", type: "bind", source: "/var/lib/docker/containers/x/resolv.conf", options: ["rbind", "rprivate"] },
    { destination: "/data/", type: "bind", source: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~empty-dir/data", options: ["rbind", "rprivate"] },
    { destination: "/etc/hosts", source: "/var/lib/kubelet/pods/p/etc-hosts", options: ["rbind", "rprivate"] },
  ],
  linux: {
    namespaces: [{ type: "pid" }, { type: "network", path: "/proc/42/ns/net" }, { type: "user", path: "/proc/1/ns/user" }],
    sysctl: { "net.ipv4.ping_group_range": "0 2147483647", "net.ipv4.ip_forward": "1" },
  },
});

t.test("applyUserns: the namespace, the mappings, the idmapped rootfs and volumes; nothing else moves", async (t) => {
  const spec = dockerSpec();
  t.same(bindMountsAt(spec, ["/data", "/etc/hosts", "/proc", "/nowhere"]), [2, 3], "only bind mounts, trailing slashes aside");
  const out = applyUserns(spec, { ...KUBELET, join: true, idmapMounts: ["/data", "/etc/hosts"] }, {
    rootPath: "/run/cridock-rootfs/id/m",
    mountSources: new Map([[2, "/run/cridock-rootfs/id/v2"], [3, "/run/cridock-rootfs/id/v3"]]),
    joinPath: "/proc/42/ns/user",
  });
  t.same(out.linux?.namespaces, [{ type: "pid" }, { type: "network", path: "/proc/42/ns/net" }, { type: "user", path: "/proc/42/ns/user" }], "one user namespace: the sandbox's");
  t.same(out.linux?.uidMappings, [{ containerID: 0, hostID: 458752, size: 65536 }]);
  t.same(out.linux?.gidMappings, [{ containerID: 0, hostID: 458752, size: 65536 }]);
  t.same(out.linux?.sysctl, { "net.ipv4.ping_group_range": "0 65535", "net.ipv4.ip_forward": "1" }, "Docker's default narrowed to the mapped groups");
  t.same(out.root, { path: "/run/cridock-rootfs/id/m", readonly: false });
  t.same(out.mounts?.map((m) => m.source), ["proc", "/var/lib/docker/containers/x/resolv.conf", "/run/cridock-rootfs/id/v2", "/run/cridock-rootfs/id/v3"]);
  const sandbox = applyUserns(dockerSpec(), { ...KUBELET, join: false, idmapMounts: [] }, { rootPath: "/r", mountSources: new Map() });
  t.same(sandbox.linux?.namespaces?.at(-1), { type: "user" }, "the sandbox makes a new one");
  const asked = dockerSpec();
  asked.linux!.sysctl!["net.ipv4.ping_group_range"] = "0 10";
  t.equal(applyUserns(asked, { ...KUBELET, join: false, idmapMounts: [] }, { rootPath: "/r", mountSources: new Map() }).linux?.sysctl?.["net.ipv4.ping_group_range"], "0 10", "a pod's own value is kept");
});

const MOUNTINFO = [
  "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw",
  "301 22 0:60 / /var/lib/docker/overlay2/abc/merged rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,upperdir=/var/lib/docker/overlay2/abc/diff,workdir=/var/lib/docker/overlay2/abc/work,index=off",
  "302 22 0:61 / /run/cridock-rootfs/id/0 rw - ext4 /dev/vda1 rw",
  "303 22 0:62 / /run/cridock-rootfs/id/m rw - overlay overlay rw,lowerdir=0:1,upperdir=u/diff,workdir=u/work",
  "304 22 0:63 / /run/cridock-rootfs/id2/m rw - overlay overlay rw",
  "305 22 0:64 / /mnt/with\\040space rw - tmpfs tmpfs rw",
].join("\n");

t.test("mountinfo: the rootfs overlay's layers, and what lies under a container's directory", async (t) => {
  const mounts = parseMountinfo(MOUNTINFO);
  const root = mountAt(mounts, "/var/lib/docker/overlay2/abc/merged");
  t.equal(root?.fsType, "overlay");
  t.same(overlayLayers(root!.superOptions), {
    lowers: ["/var/lib/docker/overlay2/l/A", "/var/lib/docker/overlay2/l/B"],
    upper: "/var/lib/docker/overlay2/abc/diff",
    work: "/var/lib/docker/overlay2/abc/work",
  });
  t.equal(mountAt(mounts, "/mnt/with space")?.fsType, "tmpfs", "mountinfo's octal escapes are undone");
  t.same(mountsUnder(mounts, "/run/cridock-rootfs/id"), ["/run/cridock-rootfs/id/m", "/run/cridock-rootfs/id/0"], "latest first, and not id2's");
  t.same(overlayLayers("rw,lowerdir+=/a,lowerdir+=/b,upperdir=/u/d,workdir=/u/w").lowers, ["/a", "/b"], "the new mount API's form");
  t.same(overlayLayers("rw,lowerdir=/a\\054b:/c,upperdir=/u/d,workdir=/u/w").lowers, ["/a,b", "/c"], "a comma inside a path");
  t.throws(() => overlayLayers("rw,lowerdir=l/A:l/B,upperdir=/u/d,workdir=/u/w"), /relative/);
  t.throws(() => overlayLayers("rw,lowerdir=/a::/data,upperdir=/u/d,workdir=/u/w"), /data-only/);
  t.throws(() => overlayLayers("rw,lowerdir=/a:/b"), /read-only overlay/);
});

const LAYER: OciLayer = { runtime: "cridock", launcher: "/l", delegate: "/usr/sbin/runc", editsDir: "/e", rootfsDir: "/run/cridock-rootfs" };
const ENGINE = { Driver: "overlay2", SecurityOptions: ["name=seccomp,profile=builtin", "name=cgroupns"], apiVersion: "1.52" };

t.test("the node's answer names the first part it lacks", async (t) => {
  const ok = { layer: LAYER, kernel: "6.12.57+deb13-amd64", mountVersion: [2, 41] as [number, number], info: ENGINE };
  t.same(judgeUserns(ok), { ok: true, layer: LAYER }, "Debian 13 with Engine 29");
  const why = (over: Partial<typeof ok>) => {
    const r = judgeUserns({ ...ok, ...over });
    return r.ok ? "ok" : r.reason;
  };
  t.match(why({ layer: undefined }), /not registered/);
  t.match(why({ layer: { ...LAYER, rootfsDir: undefined } }), /install` again/);
  t.match(why({ kernel: "6.1.0-40-amd64" }), /Linux 6\.1\.0-40-amd64 is older than 6\.3/, "Debian 12");
  t.match(why({ mountVersion: [2, 38] }), /2\.38, older than 2\.39/, "Debian 12's util-linux");
  t.match(why({ mountVersion: undefined }), /not found/);
  t.match(why({ info: { ...ENGINE, Driver: "vfs" } }), /storage driver is vfs/);
  t.equal(why({ info: { ...ENGINE, Driver: "overlayfs" } }), "ok", "containerd's snapshotter");
  t.match(why({ info: { ...ENGINE, apiVersion: "1.41" } }), /1\.41, older than 1\.43/, "Docker 20.10");
  t.match(why({ info: { ...ENGINE, SecurityOptions: ["name=userns"] } }), /userns-remap/);
  t.same(utilLinuxVersion("mount from util-linux 2.41 (libmount 2.41.0: selinux, smack, btrfs, verity, namespaces, idmapping, assert, debug)"), [2, 41]);
  t.equal(utilLinuxVersion("mount (BusyBox)"), undefined);
});

t.test("userns_options: NODE is the host's, POD carries the mappings, anything else is refused", async (t) => {
  const ids = [{ hostId: 458752, containerId: 0, length: 65536 }];
  t.equal(usernsFromCri(undefined, "container"), undefined);
  t.equal(usernsFromCri({ mode: NamespaceMode.NODE }, "container"), undefined);
  t.same(usernsFromCri({ mode: NamespaceMode.POD, uids: ids, gids: ids }, "container"), KUBELET);
  t.match(code(() => usernsFromCri({ mode: NamespaceMode.NODE, uids: ids }, "pod sandbox")), /INVALID_ARGUMENT pod sandbox user namespace mode NODE comes with/);
  t.match(code(() => usernsFromCri({ mode: NamespaceMode.POD }, "pod sandbox")), /INVALID_ARGUMENT .*needs uid and gid mappings/);
  t.match(code(() => usernsFromCri({ mode: NamespaceMode.CONTAINER, uids: ids, gids: ids }, "container")), /INVALID_ARGUMENT .*mode CONTAINER is not NODE or POD/);
  t.match(code(() => usernsFromCri({ mode: NamespaceMode.TARGET }, "pod sandbox")), /INVALID_ARGUMENT .*mode TARGET is not NODE or POD/);
  t.match(code(() => usernsFromCri({ mode: 7 as NamespaceMode }, "pod sandbox")), /INVALID_ARGUMENT .*mode 7 is not NODE or POD/);
});

t.test("a container of a pod in its own namespace: the pod's mappings, and its volumes' mappings the pod's too", async (t) => {
  const view = { id: "f".repeat(64), userns: KUBELET } as SandboxView;
  const plain = { id: "e".repeat(64) } as SandboxView;
  const volume = (over: Partial<MountSpec> = {}): MountSpec => ({
    containerPath: "/data", hostPath: "/var/lib/kubelet/pods/p/volumes/x", readonly: false, selinuxRelabel: false,
    propagation: "private", recursiveReadOnly: false, image: "", imageSubPath: "", ...over,
  });
  t.same(checkPodUserns(structuredClone(KUBELET), view, "app", [volume({ idMappings: structuredClone(KUBELET) }), volume({ containerPath: "/etc/hosts" })]), KUBELET);
  t.equal(checkPodUserns(undefined, plain, "app", [volume()]), undefined, "the host's, as before");
  t.match(code(() => checkPodUserns(undefined, view, "app")), /INVALID_ARGUMENT .*asks for the host's user namespace/);
  t.match(code(() => checkPodUserns(KUBELET, plain, "app")), /INVALID_ARGUMENT .*runs in the host's/);
  t.match(code(() => checkPodUserns({ ...KUBELET, uids: [{ containerId: 0, hostId: 65536, length: 65536 }] }, view, "app")), /INVALID_ARGUMENT .*differ/);
  t.match(code(() => checkPodUserns(undefined, plain, "app", [volume({ idMappings: KUBELET })])), /UNIMPLEMENTED .*only in a pod with its own user namespace/);
  t.match(code(() => checkPodUserns(KUBELET, view, "app", [volume({ idMappings: { ...KUBELET, gids: [{ containerId: 0, hostId: 65536, length: 65536 }] } })])), /INVALID_ARGUMENT .*are not its pod's/);
  t.same(idmappedMounts([volume({ idMappings: KUBELET }), volume({ containerPath: "/etc/hosts" })]), ["/data"], "only the mounts kubelet gave mappings");
});
