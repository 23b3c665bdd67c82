/**
 * The pure parts of a restore from a checkpoint archive: reading the archive
 * (checkpoint-archive-read.ts), with what CheckpointContainer writes read
 * back and each kind of hostile archive refused with INVALID_ARGUMENT naming
 * what is wrong; and the overlay2 whiteouts that apply deleted.files
 * (overlay-whiteouts.ts), on real directories with real character devices
 * (the unit suite runs as root; skipped otherwise). The restore itself,
 * through Docker and CRIU, is tested on the cgroup v2 node
 * (test/vm-lifecycle/checkpoint.test.ts).
 */
import t from "tap";
import { chown, lstat, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import { createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pack as tarPack, type Pack } from "tar-stream";
import { codeOf } from "../../../helpers/rejection.ts";
import { writeCheckpointArchive } from "../../../../src/runtime/container/checkpoint-archive.ts";
import { readCheckpointArchive } from "../../../../src/runtime/container/checkpoint-archive-read.ts";
import { isCheckpointArchivePath, misplacedRestoreCgroup } from "../../../../src/runtime/container/checkpoint-restore.ts";
import { overlayDirectories, whiteOut } from "../../../../src/runtime/container/overlay-whiteouts.ts";

const IMAGE_ID = `sha256:${"c".repeat(64)}`;
const CONFIG = { id: "a".repeat(64), name: "k8s_count_p_default_u_0", rootfsImage: "busybox:1", rootfsImageRef: IMAGE_ID, rootfsImageName: "busybox:1" };

async function scratch(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-restore-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

type Entry = { header: Parameters<Pack["entry"]>[0]; body?: string };

/** A tar of exactly these entries (hostile ones included). */
async function tarOf(path: string, entries: Entry[]): Promise<string> {
  const pack = tarPack();
  const out = createWriteStream(path);
  const done = new Promise<void>((resolve, reject) => {
    out.once("finish", resolve);
    out.once("error", reject);
  });
  pack.pipe(out);
  for (const { header, body } of entries) {
    await new Promise<void>((resolve, reject) => pack.entry(header, body ?? "", (err) => (err ? reject(err) : resolve())));
  }
  pack.finalize();
  await done;
  return path;
}

const file = (name: string, body: string): Entry => ({ header: { name, type: "file" }, body });
const good = (): Entry[] => [
  file("config.dump", JSON.stringify(CONFIG)),
  file("spec.dump", JSON.stringify({ ociVersion: "1.0.2", annotations: {} })),
  { header: { name: "checkpoint/", type: "directory" } },
  file("checkpoint/inventory.img", "inv"),
  file("checkpoint/pages-1.img", "pages"),
];

t.test("an image that is a path names a checkpoint archive; references never start with /", async (t) => {
  t.ok(isCheckpointArchivePath("/var/lib/kubelet/checkpoints/c.tar"));
  for (const ref of ["busybox", "registry:5000/a/b:1", `busybox@sha256:${"d".repeat(64)}`, IMAGE_ID]) t.notOk(isCheckpointArchivePath(ref), ref);
});

t.test("what CheckpointContainer writes reads back, and a sink gets CRIU's images and rootfs-diff.tar", async (t) => {
  const dir = await scratch(t);
  const images = join(dir, "images");
  await mkdir(join(images, "sub"), { recursive: true });
  await writeFile(join(images, "inventory.img"), "inventory");
  await writeFile(join(images, "pages-1.img"), Buffer.alloc(70_000, 7));
  await writeFile(join(images, "sub", "x.img"), "x");
  const diff = await tarOf(join(dir, "diff.tar"), [file("etc/marker", "hello")]);
  const archive = join(dir, "c.tar");
  await writeCheckpointArchive(archive, {
    imagesDirectory: images,
    configDump: CONFIG,
    specDump: { ociVersion: "1.0.2", annotations: { "io.kubernetes.cri.container-name": "count" } },
    rootfsDiffTar: diff,
    deletedFiles: ["/etc/group"],
  });
  const metadata = await readCheckpointArchive(archive);
  t.match(metadata, { config: CONFIG, spec: { annotations: { "io.kubernetes.cri.container-name": "count" } }, deleted: ["/etc/group"], hasRootfsDiff: true, imageFiles: 3 });

  const got = new Map<string, Buffer>();
  const dirs: string[] = [];
  let diffBytes = 0;
  const collect = async (body: AsyncIterable<Uint8Array>) => {
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(Buffer.from(c));
    return Buffer.concat(chunks);
  };
  await readCheckpointArchive(archive, {
    imageDirectory: async (name) => void dirs.push(name),
    imageFile: async (name, body) => void got.set(name, await collect(body)),
    rootfsDiff: async (body) => void (diffBytes = (await collect(body)).length),
  });
  t.same([...got.keys()].sort(), ["inventory.img", "pages-1.img", "sub/x.img"]);
  t.equal(got.get("pages-1.img")?.length, 70_000, "a file's whole content");
  t.same(dirs, ["sub"]);
  t.equal(diffBytes, (await readFile(diff)).length, "rootfs-diff.tar as it was packed");
});

t.test("a hostile or broken archive is INVALID_ARGUMENT naming what is wrong", async (t) => {
  const dir = await scratch(t);
  const cases: [string, Entry[], RegExp][] = [
    ["no CRIU images", good().filter((e) => !e.header.name.startsWith("checkpoint/")), /no checkpoint\/inventory\.img/],
    ["no config.dump", good().filter((e) => e.header.name !== "config.dump"), /no config\.dump/],
    ["config.dump not JSON", [...good().filter((e) => e.header.name !== "config.dump"), file("config.dump", "{")], /config\.dump is not JSON/],
    ["config.dump naming no image", [...good().filter((e) => e.header.name !== "config.dump"), file("config.dump", "{}")], /names no image/],
    ["a parent path", [...good(), file("checkpoint/../../etc/passwd", "x")], /not a clean relative path/],
    ["an absolute path", [...good(), file("/etc/passwd", "x")], /not a clean relative path/],
    ["a symlink among the images", [...good(), { header: { name: "checkpoint/link.img", type: "symlink", linkname: "/etc/shadow" } }], /symlink; only files and directories/],
    ["a device among the images", [...good(), { header: { name: "checkpoint/dev.img", type: "character-device", devmajor: 1, devminor: 3 } }], /character-device/],
    ["a hard link as config.dump", [...good().filter((e) => e.header.name !== "config.dump"), { header: { name: "config.dump", type: "link", linkname: "spec.dump" } }], /config\.dump is a link, not a file/],
    ["an odd name under checkpoint/", [...good(), file("checkpoint/a b.img", "x")], /no name CRIU writes/],
    ["deleted.files escaping", [...good(), file("deleted.files", JSON.stringify(["/etc/../../x"]))], /not a clean absolute path/],
    ["deleted.files relative", [...good(), file("deleted.files", JSON.stringify(["etc/group"]))], /not a clean absolute path/],
    ["deleted.files not a list", [...good(), file("deleted.files", JSON.stringify({ a: 1 }))], /not a JSON list/],
  ];
  for (const [what, entries, message] of cases) {
    const archive = await tarOf(join(dir, `${what.replace(/\W+/g, "-")}.tar`), entries);
    const got = await codeOf(readCheckpointArchive(archive));
    t.equal(got.code, "INVALID_ARGUMENT", what);
    t.match(got.message, message, what);
    t.match(got.message, archive, `${what}: the message names the archive`);
  }
  const notTar = join(dir, "not.tar");
  await writeFile(notTar, "this is not a tar archive at all, not even close".repeat(20));
  const got = await codeOf(readCheckpointArchive(notTar));
  t.equal(got.code, "INVALID_ARGUMENT");
  t.match(got.message, /no checkpoint\/inventory\.img|cannot be read as a tar archive/);
});

t.test("overlay2's directories from Docker's inspect; none for another driver", async (t) => {
  t.same(overlayDirectories({ Name: "overlay2", Data: { UpperDir: "/u", LowerDir: "/l1:/l2", MergedDir: "/m" } }), { upper: "/u", lowers: ["/l1", "/l2"] });
  t.equal(overlayDirectories({ Name: "overlayfs", Data: null }), undefined, "the containerd snapshotter");
  t.equal(overlayDirectories({ Name: "btrfs", Data: {} }), undefined);
  t.equal(overlayDirectories(undefined), undefined);
});

const root = process.getuid?.() === 0;
t.test("deleted.files become whiteouts in the upper directory", { skip: root ? false : "needs root (mknod, chown)" }, async (t) => {
  const dir = await scratch(t);
  const [upper, top, bottom, outside] = ["upper", "top", "bottom", "outside"].map((n) => join(dir, n)) as [string, string, string, string];
  for (const d of [upper, top, bottom, outside]) await mkdir(d);
  // bottom: /etc (0750, owned by 1234:5678) with group and motd; /opt/tool; /data/x
  await mkdir(join(bottom, "etc"), { mode: 0o750 });
  await chown(join(bottom, "etc"), 1234, 5678);
  await writeFile(join(bottom, "etc", "group"), "root:x:0:");
  await writeFile(join(bottom, "etc", "motd"), "hi");
  await mkdir(join(bottom, "opt"));
  await writeFile(join(bottom, "opt", "tool"), "t");
  await mkdir(join(bottom, "var"));
  await writeFile(join(bottom, "var", "secret"), "s");
  // top: /var is a symlink out of the layer (hides bottom's /var); /opt/tool whited out already
  await symlink(outside, join(top, "var"));
  await writeFile(join(outside, "secret"), "host file");
  await mkdir(join(top, "opt"));
  execFileSync("mknod", [join(top, "opt", "tool"), "c", "0", "0"]);
  // upper: /etc/motd was modified by the container (a copy in upper)
  await mkdir(join(upper, "etc"), { mode: 0o750 });
  await writeFile(join(upper, "etc", "motd"), "changed");

  const made = await whiteOut({ upper, lowers: [top, bottom] }, ["/etc/group", "/etc/motd", "/opt/tool", "/var/secret", "/nowhere/file", "/etc/never-existed"]);
  t.equal(made, 2, "/etc/group and /etc/motd");
  for (const name of ["group", "motd"]) {
    const st = await lstat(join(upper, "etc", name));
    t.ok(st.isCharacterDevice() && st.rdev === 0, `/etc/${name} is a whiteout`);
  }
  t.same((await readdir(join(upper))).sort(), ["etc"], "nothing made for paths no layer shows: /opt/tool is whited out below, /var is a symlink, /nowhere is absent");
  t.equal(await readFile(join(outside, "secret"), "utf8"), "host file", "nothing outside the layers is touched");

  const fresh = join(dir, "upper2");
  await mkdir(fresh);
  t.equal(await whiteOut({ upper: fresh, lowers: [bottom] }, ["/etc/group"]), 1);
  const etc = await lstat(join(fresh, "etc"));
  t.equal(etc.mode & 0o7777, 0o750, "a parent made in upper has the lower directory's mode");
  t.same([etc.uid, etc.gid], [1234, 5678], "and its owner");
});

t.test("a restored init in another container's cgroup is found, on cgroup v2 and v1", async (t) => {
  const id = "e".repeat(64);
  const other = "7".repeat(64);
  const file = (text: string) => async () => text;
  t.equal(await misplacedRestoreCgroup(id, 42, file(`0::/system.slice/docker-${id}.scope\n`)), undefined, "systemd driver, its own scope");
  t.equal(await misplacedRestoreCgroup(id, 42, file(`0::/kubepods/besteffort/pod1/${id}\n`)), undefined, "cgroupfs driver, its own directory");
  t.equal(await misplacedRestoreCgroup(id, 42, file(`0::/system.slice/docker-${other}.scope\n`)), `/system.slice/docker-${other}.scope`, "the checkpointed container's scope");
  const v1 = (path: string) => `12:pids:${path}\n11:cpu,cpuacct:${path}\n4:memory:${path}\n1:name=systemd:/init.scope\n`;
  t.equal(await misplacedRestoreCgroup(id, 42, file(v1(`/docker/${id}`))), undefined, "cgroup v1: the memory hierarchy's path");
  t.equal(await misplacedRestoreCgroup(id, 42, file(v1(`/docker/${other}`))), `/docker/${other}`);
  t.equal(await misplacedRestoreCgroup(id, 0, file("0::/elsewhere\n")), undefined, "no process (exited): nothing to look at");
  t.equal(await misplacedRestoreCgroup(id, 42, async () => Promise.reject(new Error("ENOENT"))), undefined, "gone meanwhile");
});
