import t, { type Test } from "tap";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyEditsToBundle, runOciEdit } from "../../../src/oci/edit-command.ts";
import { SpecEditsStore } from "../../../src/oci/edits-store.ts";

const ID = "c".repeat(64);

function bundle(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-edit-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const b = join(dir, "bundle");
  mkdirSync(b);
  writeFileSync(join(b, "config.json"), JSON.stringify({ ociVersion: "1.2.0", linux: { resources: { pids: { limit: 5 } } } }), { mode: 0o600 });
  return { dir, bundle: b, store: new SpecEditsStore(join(dir, "edits")) };
}

t.test("the store's edits reach the bundle's config.json, which keeps its mode", async (t) => {
  const { bundle: b, store } = bundle(t);
  await store.write(ID, { version: 1, unified: { "memory.oom.group": "1" } });
  t.equal(statSync(store.dir).mode & 0o777, 0o700);
  t.equal(statSync(join(store.dir, `${ID}.json`)).mode & 0o777, 0o600);
  await applyEditsToBundle(b, join(store.dir, `${ID}.json`));
  t.same(JSON.parse(readFileSync(join(b, "config.json"), "utf8")), { ociVersion: "1.2.0", linux: { resources: { pids: { limit: 5 }, unified: { "memory.oom.group": "1" } } } });
  t.equal(statSync(join(b, "config.json")).mode & 0o777, 0o600);
  await store.remove(ID);
  await store.remove(ID);
  t.rejects(store.write("../x", { version: 1 }), /not a full Docker container id/);
});

t.test("bind mount options written by the server reach that mount in config.json; a mount the bundle lacks fails the edit", async (t) => {
  const { dir, bundle: b, store } = bundle(t);
  const volume = { destination: "/data", type: "bind", source: "/var/lib/kubelet/pods/u/volumes/v", options: ["rbind", "ro", "rprivate"] };
  writeFileSync(join(b, "config.json"), JSON.stringify({ ociVersion: "1.2.0", mounts: [volume] }), { mode: 0o600 });
  await store.write(ID, { version: 1, mountOptions: [{ destination: "/data", options: ["noexec", "nosuid", "nodev"] }] });
  await applyEditsToBundle(b, join(store.dir, `${ID}.json`));
  t.same(JSON.parse(readFileSync(join(b, "config.json"), "utf8")).mounts, [{ ...volume, options: ["rbind", "ro", "rprivate", "noexec", "nosuid", "nodev"] }]);
  await store.write(ID, { version: 1, mountOptions: [{ destination: "/elsewhere", options: ["noexec"] }] });
  const log = join(dir, "log.json");
  t.equal(await runOciEdit(["--bundle", b, "--edits", join(store.dir, `${ID}.json`), "--log", log]), 1, "the runtime's create fails");
  t.match(JSON.parse(readFileSync(log, "utf8").trim()).msg, /was not started: the bundle's config.json has no mount at \/elsewhere/);
});

t.test("edits anyone else could have written are refused", async (t) => {
  const { bundle: b, store } = bundle(t);
  await store.write(ID, { version: 1, unified: { "memory.oom.group": "1" } });
  const path = join(store.dir, `${ID}.json`);
  chmodSync(path, 0o666);
  await t.rejects(applyEditsToBundle(b, path), /writable by group or others/);
  chmodSync(path, 0o600);
  chmodSync(store.dir, 0o777);
  await t.rejects(applyEditsToBundle(b, path), /edits directory .* writable by group or others/);
  chmodSync(store.dir, 0o700);
  const link = join(store.dir, `${"d".repeat(64)}.json`);
  symlinkSync(path, link);
  await t.rejects(applyEditsToBundle(b, link), /symbolic link/);
});

t.test("a failed edit exits 1 and says why in the runtime's JSON log", async (t) => {
  const { dir, bundle: b, store } = bundle(t);
  await store.write(ID, { version: 1 });
  writeFileSync(join(store.dir, `${ID}.json`), '{"version":1,"unified":{"cgroup.procs":"1"}}', { mode: 0o600 });
  const log = join(dir, "log.json");
  const code = await runOciEdit(["--bundle", b, "--edits", join(store.dir, `${ID}.json`), "--log", log]);
  t.equal(code, 1);
  const line = JSON.parse(readFileSync(log, "utf8").trim());
  t.equal(line.level, "error");
  t.match(line.msg, /not started: .*cgroup.procs/);
  t.same(JSON.parse(readFileSync(join(b, "config.json"), "utf8")).linux.resources, { pids: { limit: 5 } }, "the spec is untouched");
  t.equal(await runOciEdit(["--bundle", b]), 2, "--edits is required");
  t.equal(await runOciEdit(["--nope"]), 2);
});

t.test("sweep removes what is older than the age given, and nothing younger", async (t) => {
  const { store } = bundle(t);
  const young = "e".repeat(64);
  await store.write(ID, { version: 1 });
  await store.write(young, { version: 1 });
  writeFileSync(join(store.dir, "stray.tmp"), "");
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(join(store.dir, `${ID}.json`), hourAgo, hourAgo);
  utimesSync(join(store.dir, "stray.tmp"), hourAgo, hourAgo);
  t.same((await store.sweep(600_000)).sort(), [`${ID}.json`, "stray.tmp"]);
  t.same(readdirSync(store.dir), [`${young}.json`]);
  t.same(await new SpecEditsStore(join(store.dir, "missing")).sweep(0), [], "no directory: nothing to do");
});
