/**
 * `cridock oci-layer uninstall` and the edits directory
 * (src/oci/edits-dir-removal.ts): only cridock's files go, the directory
 * only when that empties it, and a symlink is refused, not followed.
 */
import t, { type Test } from "tap";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeEditsDir } from "../../../src/oci/edits-dir-removal.ts";
import { SpecEditsStore } from "../../../src/oci/edits-store.ts";

const ID = "a".repeat(64);
const ID2 = "b".repeat(64);

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), "cridock-edits-rm-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test("cridock's edits and their temporary files go, then the emptied directory", async (t) => {
  const dir = tempDir(t);
  const store = new SpecEditsStore(join(dir, "edits"));
  await store.write(ID, { version: 1, unified: { "memory.oom.group": "1" } });
  writeFileSync(join(store.dir, `${ID2}.json.cridock-1234-0a1b2c3d.tmp`), "{");
  writeFileSync(join(store.dir, `${ID2}.json.cridock-99.tmp`), "{");
  t.equal(await removeEditsDir(store.dir), "");
  t.notOk(existsSync(store.dir), "the directory is gone");
  t.equal(await removeEditsDir(store.dir), "", "a directory that is not there: nothing to do");
});

t.test("anything else stays, and so does the directory", async (t) => {
  const dir = tempDir(t);
  const edits = join(dir, "edits");
  mkdirSync(edits);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  writeFileSync(join(edits, "notes.txt"), "the operator's");
  writeFileSync(join(edits, `${ID}.JSON`), "not ours: upper case");
  writeFileSync(join(edits, `${"a".repeat(63)}.json`), "not ours: 63 digits");
  mkdirSync(join(edits, `${ID2}.json`));
  writeFileSync(join(edits, `${ID2}.json`, "inside"), "a directory with an edit's name is not removed, nor what it holds");
  const left = await removeEditsDir(edits);
  t.match(left, /kept: it holds 4 file\(s\) cridock did not make/);
  t.same(readdirSync(edits).sort(), [`${"a".repeat(63)}.json`, `${ID}.JSON`, `${ID2}.json`, "notes.txt"].sort(), "only cridock's edit went");
  t.ok(existsSync(join(edits, `${ID2}.json`, "inside")));
});

t.test("an --edits-dir that is a symlink (or a file) is refused, and what it points at is untouched", async (t) => {
  const dir = tempDir(t);
  const precious = join(dir, "precious");
  mkdirSync(precious);
  writeFileSync(join(precious, `${ID}.json`), "looks like an edit, is not cridock's to take through a link");
  const link = join(dir, "edits");
  symlinkSync(precious, link);
  await t.rejects(removeEditsDir(link), /is a symbolic link: not followed, nothing removed/);
  t.ok(existsSync(join(precious, `${ID}.json`)));
  t.ok(existsSync(link));
  writeFileSync(join(dir, "file"), "x");
  await t.rejects(removeEditsDir(join(dir, "file")), /is not a directory/);
});

t.test("an edit that is a symlink is not followed: the link is left, its target untouched", async (t) => {
  const dir = tempDir(t);
  const edits = join(dir, "edits");
  mkdirSync(edits);
  writeFileSync(join(dir, "target"), "x");
  symlinkSync(join(dir, "target"), join(edits, `${ID}.json`));
  t.match(await removeEditsDir(edits), /kept/);
  t.ok(existsSync(join(dir, "target")));
});
