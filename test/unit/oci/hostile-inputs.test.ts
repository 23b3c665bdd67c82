/**
 * `cridock oci-edit` runs as host root on what it is handed: an edits file,
 * a bundle's config.json, a container id, a rootfs directory. Each is fed
 * here in hostile forms (links, other owners, writable by others, huge,
 * not JSON, random bytes, a mark without its edits), and each must be
 * refused with a reason before anything is mounted, created or rewritten.
 * Nothing here mounts: every refusal comes before the first mount, and
 * the one check that needs a namespace of its own is shown refusing here,
 * in the test's.
 */
import t, { type Test } from "tap";
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { applyEditsToBundle, runOciEdit } from "../../../src/oci/edit-command.ts";
import { EDITS_MAX, SpecEditsStore } from "../../../src/oci/edits-store.ts";
import { mountNamespaceProblem, release } from "../../../src/oci/idmapped-rootfs.ts";
import { layerDirProblem } from "../../../src/oci/layer-dirs.ts";
import { mountContaining, mountinfoEscape, parseMountinfo } from "../../../src/mountinfo.ts";
import { parseSpecEdits, type SpecEdits } from "../../../src/oci/spec-edits.ts";

const ID = "d".repeat(64);
const RANGE = [{ containerId: 0, hostId: 65536 * 5, length: 65536 }];
const USERNS: SpecEdits = { version: 1, userns: { uids: RANGE, gids: RANGE, join: false, idmapMounts: [] } };
const CONFIG = JSON.stringify({ ociVersion: "1.2.0", root: { path: "rootfs" }, annotations: { "io.cridock.userns": "pod" } });
const asRoot = process.getuid?.() === 0;

function scene(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-hostile-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // As the default /run is: the pods' roots pass through it.
  chmodSync(dir, 0o711);
  const bundle = join(dir, "bundle");
  mkdirSync(bundle);
  writeFileSync(join(bundle, "config.json"), CONFIG, { mode: 0o600 });
  const store = new SpecEditsStore(join(dir, "edits"));
  const rootfs = join(dir, "rootfs");
  const config = () => readFileSync(join(bundle, "config.json"), "utf8");
  return { dir, bundle, store, rootfs, config, editsPath: join(store.dir, `${ID}.json`) };
}

t.test("edits files anyone but root could have written or swapped are refused", async (t) => {
  const s = scene(t);
  await s.store.write(ID, USERNS);
  const refuse = async (why: RegExp, label: string) => {
    await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id: ID }), why, label);
    t.equal(s.config(), CONFIG, `${label}: config.json untouched`);
    t.notOk(existsSync(s.rootfs), `${label}: no rootfs directory made`);
  };
  chmodSync(s.editsPath, 0o620);
  await refuse(/edits file .* writable by group or others/, "a group-writable file");
  chmodSync(s.editsPath, 0o600);
  if (asRoot) {
    chownSync(s.editsPath, 65534, 65534);
    await refuse(/edits file .* owned by uid 65534, not root/, "a file of nobody's");
    chownSync(s.editsPath, 0, 0);
    chownSync(s.store.dir, 65534, 65534);
    await refuse(/edits directory .* owned by uid 65534/, "a directory of nobody's");
    chownSync(s.store.dir, 0, 0);
  }
  chmodSync(s.store.dir, 0o757);
  await refuse(/edits directory .* writable by group or others/, "an other-writable directory");
  chmodSync(s.store.dir, 0o700);
  chmodSync(s.dir, 0o777);
  await refuse(/edits directory .*: .* writable by group or others \(mode 0777\) and not sticky/, "a directory above it anyone may write");
  chmodSync(s.dir, 0o711);

  const linkedDir = join(s.dir, "linked-edits");
  symlinkSync(s.store.dir, linkedDir);
  await t.rejects(applyEditsToBundle(s.bundle, join(linkedDir, `${ID}.json`)), /edits directory .* is a symbolic link/, "a link to the edits directory");
  const linkedFile = join(s.store.dir, `${"e".repeat(64)}.json`);
  symlinkSync(s.editsPath, linkedFile);
  await t.rejects(applyEditsToBundle(s.bundle, linkedFile), /symbolic link/, "a link to an edits file");
  const fifo = join(s.store.dir, `${"f".repeat(64)}.json`);
  if (spawnSync("mkfifo", ["-m", "0600", fifo]).status === 0) {
    await t.rejects(applyEditsToBundle(s.bundle, fifo), /not a regular file/, "a FIFO is never opened (it would block the create)");
  }
  const huge = join(s.store.dir, `${"a".repeat(64)}.json`);
  writeFileSync(huge, "", { mode: 0o600 });
  truncateSync(huge, EDITS_MAX + 1);
  await t.rejects(applyEditsToBundle(s.bundle, huge), /bytes, more than any edit needs/, "a huge file is not read");
});

t.test("edits that are not the known shape are refused, and random bytes never crash the parser", async (t) => {
  const s = scene(t);
  await s.store.write(ID, USERNS);
  for (const [text, why] of [
    ["", /not JSON/],
    ["{", /not JSON/],
    ["null", /not a JSON object/],
    ['{"version":1,"userns":null}', /userns is not an object/],
    ['{"version":1,"userns":{"uids":[],"gids":[],"join":false,"idmapMounts":[]}}', /no uid mapping/],
    ['{"version":1,"__proto__":{"userns":1}}', /carry __proto__/],
    [JSON.stringify({ ...USERNS, userns: { ...USERNS.userns, idmapMounts: Array.from({ length: 1025 }, () => "/x") } }), /at most 1024 paths/],
    [JSON.stringify({ ...USERNS, userns: { ...USERNS.userns, idmapMounts: ["/a\u0000b"] } }), /not an absolute path/],
  ] as const) {
    writeFileSync(s.editsPath, text, { mode: 0o600 });
    await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id: ID }), why, JSON.stringify(text).slice(0, 60));
    t.equal(s.config(), CONFIG);
  }
  const valid = JSON.stringify(USERNS);
  let accepted = 0;
  for (let i = 0; i < 3000; i++) {
    let text: string;
    if (i % 3 === 0) text = randomBytes(1 + (i % 64)).toString("latin1");
    else {
      // A valid file with a few characters changed, cut or doubled.
      const chars = [...valid];
      for (let k = 0; k < 1 + (i % 4); k++) {
        const at = (i * 7919 + k * 104729) % chars.length;
        chars[at] = String.fromCharCode(32 + ((i + k) % 95));
      }
      text = i % 5 === 0 ? chars.join("").slice(0, i % valid.length) : chars.join("");
    }
    try {
      const edits = parseSpecEdits(text);
      accepted++;
      // Whatever passes is of the known shape, with mappings off the host's own ids.
      for (const m of [...(edits.userns?.uids ?? []), ...(edits.userns?.gids ?? [])]) t.ok(m.hostId >= 65536, "accepted mappings stay off the host's ids");
    } catch (err) {
      if (!(err instanceof Error) || !/spec edits/.test(err.message)) t.fail(`an unexpected failure for ${JSON.stringify(text).slice(0, 80)}: ${String(err)}`);
    }
  }
  t.comment(`${accepted} of 3000 mutated inputs parsed`);
});

t.test("a spec marked for its pod's user namespace with edits that do not give it one is refused", async (t) => {
  const s = scene(t);
  await s.store.write(ID, { version: 1, unified: { "memory.oom.group": "1" } });
  await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id: ID }), /marked for its pod's user namespace \(io\.cridock\.userns\) and its spec edits do not give it one/);
  t.equal(s.config(), CONFIG, "config.json untouched: the container does not start in the host's namespace");
  const log = join(s.dir, "log.json");
  t.equal(await runOciEdit(["--bundle", s.bundle, "--edits", s.editsPath, "--log", log]), 1);
  t.match(JSON.parse(readFileSync(log, "utf8")), { level: "error", msg: /not started: .*marked for its pod's user namespace/ });
  writeFileSync(join(s.bundle, "config.json"), JSON.stringify({ annotations: { other: "x" } }), { mode: 0o600 });
  await applyEditsToBundle(s.bundle, s.editsPath);
  t.match(JSON.parse(s.config()), { linux: { resources: { unified: { "memory.oom.group": "1" } } } }, "an unmarked spec takes unified edits as before");
});

t.test("a bundle's config.json that is not a spec is refused", async (t) => {
  const s = scene(t);
  await s.store.write(ID, { version: 1 });
  for (const [text, why] of [["not json", /is not JSON/], ["[]", /not a JSON object/]] as const) {
    writeFileSync(join(s.bundle, "config.json"), text, { mode: 0o600 });
    await t.rejects(applyEditsToBundle(s.bundle, s.editsPath), why);
  }
  truncateSync(join(s.bundle, "config.json"), 17 * 1024 * 1024);
  await t.rejects(applyEditsToBundle(s.bundle, s.editsPath), /more than any spec Docker writes/);
  rmSync(join(s.bundle, "config.json"));
  mkdirSync(join(s.bundle, "config.json"));
  await t.rejects(applyEditsToBundle(s.bundle, s.editsPath), /is not a file/);
});

t.test("container ids that are not Docker's are refused before any path is made of them", async (t) => {
  const s = scene(t);
  await s.store.write(ID, USERNS);
  for (const id of ["", "..", "../" + "a".repeat(61), "A".repeat(64), "a".repeat(63), "a".repeat(65), `${"a".repeat(63)}/`, `${"a".repeat(63)}\n`]) {
    await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id }), /is not a full Docker container id/, JSON.stringify(id));
    await t.rejects(release(s.rootfs, id), /is not a full Docker container id/);
    t.equal(await runOciEdit(["--release", "--id", id || "x", "--rootfs-dir", s.rootfs]), 1);
  }
  t.equal(s.config(), CONFIG);
  t.notOk(existsSync(s.rootfs), "no rootfs directory made");
});

t.test("rootfs directories that are links, someone else's or writable by others are refused before anything is made in them", async (t) => {
  const s = scene(t);
  await s.store.write(ID, USERNS);
  const attempt = (rootfsDir: string) => applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir, id: ID, outerMntns: "mnt:[1]" });
  const real = join(s.dir, "real");
  mkdirSync(real, { mode: 0o711 });
  const link = join(s.dir, "link");
  symlinkSync(real, link);
  await t.rejects(attempt(link), /rootfs directory .* is a symbolic link/, "a link to a directory");
  await t.rejects(attempt(join(link, "below")), /below: .*\/link is a symbolic link: name the real directory/, "a link above it");
  t.same(readdirSync(real), [], "nothing was made through the link");
  const writable = join(s.dir, "writable");
  mkdirSync(writable);
  chmodSync(writable, 0o773);
  await t.rejects(attempt(writable), /writable by group or others \(mode 0773\)/);
  await t.rejects(attempt(join(writable, "rootfs")), /rootfs: .*\/writable is writable by group or others \(mode 0773\) and not sticky/, "a parent anyone may write");
  const file = join(s.dir, "file");
  writeFileSync(file, "");
  await t.rejects(attempt(file), /is not a directory/);
  await t.rejects(attempt("relative/rootfs"), /absolute path/);
  if (asRoot) {
    const nobodys = join(s.dir, "nobodys");
    mkdirSync(nobodys, { mode: 0o711 });
    chownSync(nobodys, 65534, 65534);
    await t.rejects(attempt(nobodys), /owned by uid 65534, not root/);
  }
  t.same(await layerDirProblem(real, "the dir"), undefined, "root's own 0711 directory is fine");
  t.match(await layerDirProblem(tmpdir(), "the dir"), /writable by group or others \(mode 1777\)/, "a sticky directory may lie above, never be the layer's own");
});

t.test("a good rootfs directory, but in the caller's mount namespace: nothing is mounted or made", async (t) => {
  const s = scene(t);
  await s.store.write(ID, USERNS);
  const own = spawnSync("readlink", ["/proc/self/ns/mnt"], { encoding: "utf8" }).stdout.trim();
  await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id: ID }), /without a mount namespace of its own .* oci-layer install` again/, "a launcher of format 2 passes none");
  await t.rejects(applyEditsToBundle(s.bundle, s.editsPath, { rootfsDir: s.rootfs, id: ID, outerMntns: own }), /runs in the mount namespace of the runtime's caller/);
  t.same(readdirSync(s.rootfs), [], "the rootfs directory holds nothing");
  t.equal(s.config(), CONFIG);
});

t.test("the namespace check: its own, not its caller's, and the mount that holds the directory not shared", async (t) => {
  const info = (propagation: string) =>
    parseMountinfo(
      [
        `21 1 0:19 / / rw,relatime ${propagation} - ext4 /dev/vda1 rw`,
        `25 21 0:23 / /run rw,nosuid,nodev ${propagation} - tmpfs tmpfs rw,mode=755`,
        "26 25 0:24 / /run/user/1000 rw - tmpfs tmpfs rw",
      ].join("\n"),
    );
  t.equal(mountNamespaceProblem("mnt:[2]", "mnt:[1]", info("master:1"), "/run/cridock-rootfs"), undefined, "a slave of the host's /run");
  t.equal(mountNamespaceProblem("mnt:[2]", "mnt:[1]", info(""), "/run/cridock-rootfs"), undefined, "a private one");
  t.match(mountNamespaceProblem("mnt:[2]", "mnt:[1]", info("shared:1"), "/run/cridock-rootfs"), /at \/run .* is shared \(shared:1\)/);
  t.match(mountNamespaceProblem("mnt:[2]", "mnt:[1]", info("shared:5 master:1"), "/run/cridock-rootfs"), /shared/, "shared and slave still propagates to its peers");
  t.match(mountNamespaceProblem("mnt:[1]", "mnt:[1]", info("master:1"), "/run/cridock-rootfs"), /caller/);
  t.match(mountNamespaceProblem("mnt:[2]", undefined, info("master:1"), "/run/cridock-rootfs"), /install` again/);
  t.match(mountNamespaceProblem("mnt:[2]", "1; rm -rf /", info("master:1"), "/run/cridock-rootfs"), /not what \/proc shows/);
  t.equal(mountContaining(info(""), "/run/user/1000/x")?.mountPoint, "/run/user/1000");
  t.equal(mountContaining(info(""), "/run/userx")?.mountPoint, "/run", "a prefix of a name is not its parent");
  t.equal(mountinfoEscape("/run/a b\\c"), "/run/a\\040b\\134c");
});
