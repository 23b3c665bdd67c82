/**
 * The checkpoint archive (runtime/container/checkpoint-archive.ts) and its
 * root filesystem diff (rootfs-diff.ts), read back with tar-stream as
 * checkpointctl reads them: the members' names and order, config.dump's
 * fields, the diff's paths relative to the root; and the atomic write:
 * nothing at the location nor any temporary file when a step fails.
 */
import t from "tap";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { extract, pack as tarPack } from "tar-stream";
import { ARCHIVE, addEntry, writeCheckpointArchive, writeTarAtomically } from "../../../../src/runtime/container/checkpoint-archive.ts";
import { packRootfsDiff, planRootfsDiff, type ContainerFiles } from "../../../../src/runtime/container/rootfs-diff.ts";

interface TarEntry {
  name: string;
  type: string;
  mode: number;
  linkname: string | null;
  content: Buffer;
}

async function readTar(source: Buffer): Promise<TarEntry[]> {
  const reader = extract();
  Readable.from([source]).pipe(reader as unknown as NodeJS.WritableStream);
  const out: TarEntry[] = [];
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    out.push({ name: entry.header.name, type: entry.header.type, mode: entry.header.mode, linkname: entry.header.linkname ?? null, content: Buffer.concat(chunks) });
  }
  return out;
}

/** A tar as Docker's archive endpoint answers for `entries`. */
async function dockerTar(entries: { name: string; type?: "file" | "directory" | "link" | "symlink"; content?: string; linkname?: string }[]): Promise<Readable> {
  const pack = tarPack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  for (const e of entries) {
    await addEntry(pack, { name: e.name, type: e.type ?? "file", linkname: e.linkname, mode: 0o644 }, e.type && e.type !== "file" ? undefined : Buffer.from(e.content ?? ""));
  }
  pack.finalize();
  await done;
  return Readable.from([Buffer.concat(chunks)]);
}

async function scratch(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-ckpt-archive-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** CRIU's images as Docker leaves them in CheckpointDir/CheckpointID. */
async function fakeImages(dir: string): Promise<string> {
  const images = join(dir, "criu");
  await mkdir(images);
  await writeFile(join(images, "inventory.img"), "inventory");
  await writeFile(join(images, "pages-1.img"), Buffer.alloc(8192, 7));
  await writeFile(join(images, "core-1.img"), "core");
  return images;
}

t.test("planRootfsDiff: what is copied, what is listed as deleted, what is left out", async (t) => {
  const plan = planRootfsDiff(
    [
      { Path: "/etc", Kind: 0 },
      { Path: "/etc/motd", Kind: 0 },
      { Path: "/etc/passwd-", Kind: 2 },
      { Path: "/srv", Kind: 1 },
      { Path: "/srv/data", Kind: 1 },
      { Path: "/srv/data/x", Kind: 1 },
      { Path: "/dev", Kind: 0 },
      { Path: "/run", Kind: 0 },
      { Path: "/run/app.pid", Kind: 1 },
      { Path: "/data", Kind: 1 },
      { Path: "/data/inside", Kind: 1 },
      { Path: "/var/log/../../escape", Kind: 1 },
      { Path: "relative", Kind: 1 },
      { Path: "/", Kind: 0 },
    ],
    ["/data", "/dev/termination-log"],
  );
  t.same(plan.copy, [
    { path: "/etc", added: false },
    { path: "/etc/motd", added: false },
    { path: "/run/app.pid", added: true },
    { path: "/srv", added: true },
  ], "an added directory brings what is below it; /dev and /run themselves, mounts and unclean paths are left out");
  t.same(plan.deleted, ["/etc/passwd-"]);
});

t.test("packRootfsDiff: names relative to the root, modified directories left out, hostile entries refused", async (t) => {
  const served: string[] = [];
  const trees: Record<string, Parameters<typeof dockerTar>[0]> = {
    "/etc/motd": [{ name: "motd", content: "hello\n" }],
    "/srv": [
      { name: "srv/", type: "directory" },
      { name: "srv/a", content: "a" },
      { name: "srv/b", type: "link", linkname: "srv/a" },
      { name: "srv/l", type: "symlink", linkname: "/etc/motd" },
    ],
    "/top": [{ name: "top", content: "at the root" }],
  };
  const files: ContainerFiles = {
    isDirectory: async (path) => (path === "/etc" ? true : path in trees ? false : undefined),
    archive: async (path) => {
      served.push(path);
      return trees[path] ? dockerTar(trees[path]!) : undefined;
    },
  };
  const plan = {
    copy: [
      { path: "/etc", added: false },
      { path: "/etc/motd", added: false },
      { path: "/gone", added: true },
      { path: "/srv", added: true },
      { path: "/top", added: true },
    ],
    deleted: [],
  };
  const dir = await scratch(t);
  const target = join(dir, "rootfs-diff.tar");
  let copied = 0;
  await writeTarAtomically(target, async (pack) => void (copied = await packRootfsDiff(pack, files, plan)));
  t.equal(copied, 3);
  t.same(served, ["/etc/motd", "/gone", "/srv", "/top"], "a modified directory is not fetched");
  const entries = await readTar(await readFile(target));
  t.same(
    entries.map((e) => [e.name, e.type, e.linkname]),
    [
      ["etc/motd", "file", null],
      ["srv/", "directory", null],
      ["srv/a", "file", null],
      ["srv/b", "link", "srv/a"],
      ["srv/l", "symlink", "/etc/motd"],
      ["top", "file", null],
    ],
  );
  t.equal(entries[0]!.content.toString(), "hello\n");

  trees["/etc/motd"] = [{ name: "../../etc/shadow", content: "x" }];
  const hostile = join(dir, "hostile.tar");
  await t.rejects(
    writeTarAtomically(hostile, async (pack) => void (await packRootfsDiff(pack, files, { copy: [{ path: "/etc/motd", added: true }], deleted: [] }))),
    /outside motd/,
  );
  t.same((await readdir(dir)).sort(), ["rootfs-diff.tar"], "the refused diff left no file");
});

t.test("the archive: checkpointctl's members, in CRI-O's layout, readable by root alone", async (t) => {
  const dir = await scratch(t);
  const images = await fakeImages(dir);
  const diff = join(dir, ARCHIVE.rootfsDiffTar);
  await writeTarAtomically(diff, (pack) => addEntry(pack, { name: "etc/motd", mode: 0o644 }, Buffer.from("changed\n")));
  const location = join(dir, "checkpoint-web_default-app-2026-11-28T05:00:00Z.tar");
  const config = { id: "c".repeat(64), name: "k8s_app_web_default_uid_0", rootfsImageName: "busybox:1.36", createdTime: "2026-11-28T04:00:00.123456789Z" };
  await writeCheckpointArchive(location, {
    imagesDirectory: images,
    configDump: config,
    specDump: { ociVersion: "1.0.2", annotations: { "io.kubernetes.cri.container-name": "app" } },
    rootfsDiffTar: diff,
    deletedFiles: ["/etc/passwd-"],
  });
  t.equal((await stat(location)).mode & 0o777, 0o600, "the archive holds memory pages: mode 0600");
  const entries = await readTar(await readFile(location));
  t.same(
    entries.map((e) => e.name),
    ["config.dump", "spec.dump", "checkpoint/", "checkpoint/core-1.img", "checkpoint/inventory.img", "checkpoint/pages-1.img", "rootfs-diff.tar", "deleted.files"],
  );
  const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
  t.same(JSON.parse(byName["config.dump"]!.content.toString()), config);
  t.equal(JSON.parse(byName["spec.dump"]!.content.toString()).annotations["io.kubernetes.cri.container-name"], "app");
  t.same(JSON.parse(byName["deleted.files"]!.content.toString()), ["/etc/passwd-"]);
  t.equal(byName["checkpoint/"]!.type, "directory");
  t.same(byName["checkpoint/pages-1.img"]!.content, Buffer.alloc(8192, 7));
  t.same((await readTar(byName["rootfs-diff.tar"]!.content)).map((e) => e.name), ["etc/motd"]);
  t.same((await readdir(dir)).sort(), ["checkpoint-web_default-app-2026-11-28T05:00:00Z.tar", "criu", "rootfs-diff.tar"], "no temporary file is left");
});

t.test("no diff and no deletions: neither member is written", async (t) => {
  const dir = await scratch(t);
  const location = join(dir, "c.tar");
  await writeCheckpointArchive(location, { imagesDirectory: await fakeImages(dir), configDump: {}, specDump: {}, deletedFiles: [] });
  const names = (await readTar(await readFile(location))).map((e) => e.name);
  t.notOk(names.includes(ARCHIVE.rootfsDiffTar));
  t.notOk(names.includes(ARCHIVE.deletedFiles));
});

t.test("atomic: a failure or an abort leaves nothing at the location and no temporary file", async (t) => {
  const dir = await scratch(t);
  const location = join(dir, "c.tar");
  await t.rejects(
    writeCheckpointArchive(location, { imagesDirectory: join(dir, "no-such-images"), configDump: {}, specDump: {}, deletedFiles: [] }),
    { code: "ENOENT" },
    "missing CRIU images fail the write",
  );
  t.same(await readdir(dir), [], "nothing left after a failed step");

  await t.rejects(
    writeTarAtomically(location, async (pack) => {
      await addEntry(pack, { name: "a" }, Buffer.alloc(1 << 20));
      throw new Error("disk on fire");
    }),
    /disk on fire/,
  );
  t.same(await readdir(dir), [], "nothing left after the filler failed half-way");

  const controller = new AbortController();
  const aborted = writeTarAtomically(
    location,
    async (pack) => {
      await addEntry(pack, { name: "a" }, Buffer.alloc(1024));
      controller.abort(new Error("deadline"));
      await addEntry(pack, { name: "b" }, Buffer.alloc(1024));
    },
    controller.signal,
  );
  await t.rejects(aborted);
  t.same(await readdir(dir), [], "nothing left after an abort");

  await writeFile(location, "an older archive");
  await t.rejects(writeTarAtomically(location, async () => Promise.reject(new Error("no"))), /no/);
  t.equal(await readFile(location, "utf8"), "an older archive", "an existing file is only ever replaced whole");
  t.same(await readdir(dir), ["c.tar"]);
});
