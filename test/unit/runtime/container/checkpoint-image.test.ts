/**
 * Checkpoint images (checkpoint-image.ts), against a fake image reader:
 * which images are looked into (nothing to run) and which are not (any
 * Entrypoint or Cmd: no scratch container for ordinary creates); and the
 * copy of an image's members into one archive, read back as the archive
 * the image was built from, with a hostile entry left for the reader to
 * refuse and nothing left behind on failure. Against a real dockerd:
 * test/integration/containers/checkpoint.test.ts; restored for real by
 * kubelet on the cgroup v2 node: test/vm-lifecycle/checkpoint.test.ts.
 */
import t from "tap";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pack as tarPack, type Pack } from "tar-stream";
import { codeOf } from "../../../helpers/rejection.ts";
import { readCheckpointArchive } from "../../../../src/runtime/container/checkpoint-archive-read.ts";
import { CHECKPOINT_IMAGE_MARKER, CheckpointImages, mayBeCheckpointImage } from "../../../../src/runtime/container/checkpoint-image.ts";

const IMAGE = `sha256:${"e".repeat(64)}`;
const CONFIG = { id: "a".repeat(64), name: "k8s_count_p_default_u_0", rootfsImage: "busybox:1", rootfsImageRef: `sha256:${"c".repeat(64)}` };

type Entry = { header: Parameters<Pack["entry"]>[0]; body?: string };
const file = (name: string, body: string): Entry => ({ header: { name, type: "file" }, body });

/** A tar stream of these entries, as Docker's archive endpoint sends one. */
function tarStream(entries: Entry[]): Readable {
  const pack = tarPack();
  void (async () => {
    for (const { header, body } of entries) {
      await new Promise<void>((resolve, reject) => pack.entry(header, body ?? "", (err) => (err ? reject(err) : resolve())));
    }
    pack.finalize();
  })();
  return Readable.from(pack as unknown as AsyncIterable<Uint8Array>);
}

/** An image reader holding `members` (path → the tar Docker would send for it); records what was asked. */
function fakeFiles(members: Record<string, Entry[]>, asked: string[] = []) {
  return {
    exists: async (id: string, path: string) => {
      asked.push(`exists ${id} ${path}`);
      return path === CHECKPOINT_IMAGE_MARKER && "/checkpoint" in members;
    },
    archives: async (id: string, paths: readonly string[], use: (tar: Readable) => Promise<void>) => {
      asked.push(`archives ${id} ${paths.join(" ")}`);
      for (const path of paths) if (members[path]) await use(tarStream(members[path]));
    },
  };
}

const MEMBERS: Record<string, Entry[]> = {
  "/checkpoint": [{ header: { name: "checkpoint", type: "directory" } }, file("checkpoint/inventory.img", "inv"), file("checkpoint/pages-1.img", "p".repeat(5000))],
  "/config.dump": [file("config.dump", JSON.stringify(CONFIG))],
  "/spec.dump": [file("spec.dump", JSON.stringify({ ociVersion: "1.0.2" }))],
  "/deleted.files": [file("deleted.files", JSON.stringify(["/etc/group"]))],
};

async function workDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-ckpt-image-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return join(dir, "checkpoint-work");
}

t.test("only an image with nothing to run may be a checkpoint image", async (t) => {
  for (const config of [null, undefined, {}, { Cmd: [] }, { Entrypoint: null, Cmd: null }]) t.ok(mayBeCheckpointImage(config), JSON.stringify(config));
  for (const config of [{ Cmd: ["sh"] }, { Entrypoint: ["/pause"] }, { Entrypoint: ["/app"], Cmd: ["--flag"] }]) t.notOk(mayBeCheckpointImage(config), JSON.stringify(config));
});

t.test("holdsCheckpoint: an image with a command is never looked into; one without is, for the marker", async (t) => {
  const asked: string[] = [];
  const images = new CheckpointImages(fakeFiles(MEMBERS, asked), await workDir(t));
  t.notOk(await images.holdsCheckpoint(IMAGE, { Cmd: ["sh"] }));
  t.same(asked, [], "no file of it read");
  t.ok(await images.holdsCheckpoint(IMAGE, {}));
  t.same(asked, [`exists ${IMAGE} ${CHECKPOINT_IMAGE_MARKER}`]);
  const plain = new CheckpointImages(fakeFiles({ "/config.dump": MEMBERS["/config.dump"]! }), await workDir(t));
  t.notOk(await plain.holdsCheckpoint(IMAGE, {}), "no checkpoint/inventory.img: an ordinary image");
});

t.test("copyToArchive: the members, absent ones skipped, in one archive the restore reads; release removes it", async (t) => {
  const work = await workDir(t);
  const asked: string[] = [];
  const images = new CheckpointImages(fakeFiles(MEMBERS, asked), work);
  const copy = await images.copyToArchive(IMAGE);
  t.same(asked, [`archives ${IMAGE} /checkpoint /config.dump /spec.dump /rootfs-diff.tar /deleted.files`], "every member asked for, in one scratch container");
  t.match(copy.path, new RegExp(`^${work}/image-eeeeeeeeeeee-[0-9a-f]{12}\\.tar$`));
  const metadata = await readCheckpointArchive(copy.path, undefined, undefined, "checkpoint image x");
  t.match(metadata, { config: CONFIG, spec: { ociVersion: "1.0.2" }, deleted: ["/etc/group"], hasRootfsDiff: false, imageFiles: 2 });
  t.same(await readdir(work), [copy.path.split("/").pop()], "no temporary file beside it");
  await copy.release();
  t.same(await readdir(work), []);
});

t.test("a hostile entry is copied as it is, and the restore's reader refuses it naming the image", async (t) => {
  const work = await workDir(t);
  const hostile = { ...MEMBERS, "/checkpoint": [...MEMBERS["/checkpoint"]!, { header: { name: "checkpoint/evil", type: "symlink" as const, linkname: "/etc/shadow" } }] };
  const copy = await new CheckpointImages(fakeFiles(hostile), work).copyToArchive(IMAGE);
  t.teardown(copy.release);
  const refused = await codeOf(readCheckpointArchive(copy.path, undefined, undefined, "checkpoint image x"));
  t.equal(refused.code, "INVALID_ARGUMENT");
  t.match(refused.message, /^checkpoint image x is not a usable checkpoint archive: checkpoint\/evil is a symlink/);
});

t.test("a copy that fails leaves nothing in the work directory", async (t) => {
  const work = await workDir(t);
  const failing = {
    exists: async () => true,
    archives: async (_id: string, _paths: readonly string[], use: (tar: Readable) => Promise<void>) => {
      await use(tarStream(MEMBERS["/checkpoint"]!));
      throw new Error("dockerd went away");
    },
  };
  await t.rejects(new CheckpointImages(failing, work).copyToArchive(IMAGE), /dockerd went away/);
  t.same(await readdir(work), []);
});
