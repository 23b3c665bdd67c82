/**
 * The pod checkpoint archive (runtime/pod-checkpoint/archive.ts) and the
 * paths of its requests (request.ts): what is written reads back byte for
 * byte; a hostile tar (a path out of the archive, a link, a member before
 * the manifest or not named in it, one twice, one missing, a huge
 * manifest) is INVALID_ARGUMENT and copies nothing out; output_path and
 * checkpoint_path are refused when relative, unclean, through a symbolic
 * link or of the wrong type; unknown options are refused.
 */
import t from "tap";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { pack as tarPack } from "tar-stream";
import { readPodArchive, writePodArchive } from "../../../../src/runtime/pod-checkpoint/archive.ts";
import { buildManifest } from "../../../../src/runtime/pod-checkpoint/manifest.ts";
import { checkedArchivePath, checkedOptions, checkedOutputPath } from "../../../../src/runtime/pod-checkpoint/request.ts";
import { codeOf } from "../../../helpers/rejection.ts";
import { containerSpec, sandboxSpec } from "./fixtures.ts";

async function scratch(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-podckpt-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const manifest = () => buildManifest("s".repeat(64), sandboxSpec(), [{ id: "a".repeat(64), spec: containerSpec("count") }, { id: "b".repeat(64), spec: containerSpec("side") }], new Date());

/** A tar of the given entries, written as an attacker would. */
async function writeTar(path: string, entries: { name: string; body?: Buffer; type?: "file" | "symlink" | "directory"; linkname?: string }[]): Promise<void> {
  const p = tarPack();
  const done = pipeline(p as unknown as NodeJS.ReadableStream, createWriteStream(path));
  for (const e of entries) {
    await new Promise<void>((resolve, reject) => p.entry({ name: e.name, type: e.type ?? "file", linkname: e.linkname }, e.body ?? Buffer.alloc(0), (err) => (err ? reject(err) : resolve())));
  }
  p.finalize();
  await done;
}

t.test("written atomically, read back byte for byte", async (t) => {
  const dir = await scratch(t);
  const a = join(dir, "a.tar");
  const b = join(dir, "b.tar");
  await writeFile(a, Buffer.alloc(70_000, 7));
  await writeFile(b, "side");
  const out = join(dir, "pod.tar");
  await writePodArchive(out, manifest(), new Map([["containers/count.tar", a], ["containers/side.tar", b]]));
  t.same((await readdir(dir)).sort(), ["a.tar", "b.tar", "pod.tar"], "no temporary file left");
  const work = join(dir, "work");
  await mkdir(work);
  const read = await readPodArchive(out, work);
  t.same(read.manifest.containers.map((c) => c.name), ["count", "side"]);
  t.same(read.manifest.sandbox.spec, sandboxSpec());
  t.same([...read.containers.keys()], ["count", "side"]);
  t.same(await readFile(read.containers.get("count")!), await readFile(a));
  t.equal(await readFile(read.containers.get("side")!, "utf8"), "side");
});

t.test("a failed or aborted write leaves nothing at the path", async (t) => {
  const dir = await scratch(t);
  const out = join(dir, "pod.tar");
  await t.rejects(writePodArchive(out, manifest(), new Map([["containers/count.tar", join(dir, "missing")]])), /ENOENT|no archive/);
  const controller = new AbortController();
  controller.abort(new Error("deadline"));
  await t.rejects(writePodArchive(out, manifest(), new Map(), controller.signal));
  t.same(await readdir(dir), [], "no archive, no temporary file");
});

t.test("a hostile tar: INVALID_ARGUMENT, naming what is wrong", async (t) => {
  const dir = await scratch(t);
  const good = Buffer.from(JSON.stringify(manifest()));
  const cases: [string, Parameters<typeof writeTar>[1], RegExp][] = [
    ["a path out of the archive", [{ name: "pod.json", body: good }, { name: "../containers/count.tar", body: Buffer.from("x") }], /is not a clean relative path/],
    ["an absolute path", [{ name: "/etc/passwd", body: Buffer.from("x") }], /is not a clean relative path/],
    ["a link", [{ name: "pod.json", body: good }, { name: "containers/count.tar", type: "symlink", linkname: "/etc/shadow" }], /containers\/count\.tar is a symlink; the archive holds regular files only/],
    ["a member before the manifest", [{ name: "containers/count.tar", body: Buffer.from("x") }, { name: "pod.json", body: good }], /containers\/count\.tar comes before pod\.json/],
    ["a member the manifest does not name", [{ name: "pod.json", body: good }, { name: "containers/evil.tar", body: Buffer.from("x") }], /containers\/evil\.tar is not named in pod\.json/],
    ["an unknown member", [{ name: "pod.json", body: good }, { name: "run.sh", body: Buffer.from("x") }], /"run\.sh" is no member of a pod checkpoint/],
    ["a member twice", [{ name: "pod.json", body: good }, { name: "containers/count.tar", body: Buffer.from("x") }, { name: "containers/count.tar", body: Buffer.from("y") }], /holds containers\/count\.tar twice/],
    ["a member missing", [{ name: "pod.json", body: good }, { name: "containers/count.tar", body: Buffer.from("x") }], /containers\/side\.tar named in pod\.json is missing/],
    ["no manifest", [], /it has no pod\.json/],
    ["a huge manifest", [{ name: "pod.json", body: Buffer.alloc(1024 * 1024 + 1, 0x20) }], /pod\.json is 1048577 bytes, more than the 1048576 allowed/],
    ["a manifest that is not JSON", [{ name: "pod.json", body: Buffer.from("{") }], /pod\.json is not JSON/],
  ];
  for (const [what, entries, reason] of cases) {
    const path = join(dir, "hostile.tar");
    await writeTar(path, entries);
    const work = join(dir, "work");
    await rm(work, { recursive: true, force: true });
    await mkdir(work);
    const err = await codeOf(readPodArchive(path, work));
    t.equal(err.code, "INVALID_ARGUMENT", what);
    t.match(err.message, new RegExp(`^${path} is not a usable pod checkpoint archive: `), what);
    t.match(err.message, reason, what);
  }
  await writeFile(join(dir, "garbage.tar"), Buffer.alloc(2048, 0x41));
  const err = await codeOf(readPodArchive(join(dir, "garbage.tar"), dir));
  t.match(err, { code: "INVALID_ARGUMENT", message: /cannot be read as a tar archive/ }, "not a tar");
});

t.test("output_path and checkpoint_path: absolute, clean, no symbolic link; options refused", async (t) => {
  const dir = await scratch(t);
  await mkdir(join(dir, "real"));
  await symlink(join(dir, "real"), join(dir, "link"));
  await writeFile(join(dir, "real", "old.tar"), "old");
  await symlink(join(dir, "real", "old.tar"), join(dir, "real", "linked.tar"));
  t.equal(await checkedOutputPath(join(dir, "real", "p.tar")), join(dir, "real", "p.tar"));
  t.equal(await checkedOutputPath(join(dir, "real", "old.tar")), join(dir, "real", "old.tar"), "an existing file is replaced");
  for (const [path, reason] of [
    ["", /output_path is required/],
    ["p.tar", /is not an absolute path/],
    [`${dir}/real/../real/p.tar`, /is not a clean path/],
    [`${dir}/link/p.tar`, /goes through a symbolic link/],
    [`${dir}/real/linked.tar`, /exists and is not a regular file/],
    [`${dir}/real`, /is a directory/],
    [`${dir}/missing/p.tar`, /output_path .*: its directory .* does not exist/],
  ] as const) {
    t.match(await codeOf(checkedOutputPath(path)), { code: "INVALID_ARGUMENT", message: reason }, path || "empty");
  }
  t.match(await checkedArchivePath(join(dir, "real", "old.tar")), { path: join(dir, "real", "old.tar"), size: 3 });
  t.match(await codeOf(checkedArchivePath(join(dir, "real", "none.tar"))), { code: "NOT_FOUND", message: /does not exist/ });
  t.match(await codeOf(checkedArchivePath(join(dir, "real", "linked.tar"))), { code: "INVALID_ARGUMENT", message: /is not a regular file \(a symbolic link\)/ });
  t.match(await codeOf(checkedArchivePath(join(dir, "link", "old.tar"))), { code: "INVALID_ARGUMENT", message: /goes through a symbolic link/ });
  t.match(await codeOf(checkedArchivePath("relative.tar")), { code: "INVALID_ARGUMENT", message: /not a clean absolute path/ });
  t.doesNotThrow(() => checkedOptions({}, "CheckpointPod"));
  t.throws(() => checkedOptions({ "leave-running": "true" }, "CheckpointPod"), /CheckpointPod: unknown option "leave-running"; cridock takes no options for it/);
});
