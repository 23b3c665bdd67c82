import t, { type Test } from "tap";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import process from "node:process";
import { join } from "node:path";
import { parseLauncher, renderLauncher, shellWord } from "../../../src/oci/launcher.ts";

const ID = "a".repeat(64);

/**
 * The launcher run by a real /bin/sh, with a fake real runtime and a fake
 * cridock that each record their arguments (one per line).
 */
function setup(t: Test, editorExit = 0, delegateExit = 0) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-launcher-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const edits = join(dir, "edits");
  mkdirSync(edits);
  const rootfs = join(dir, "rootfs");
  mkdirSync(rootfs);
  const recorder = (name: string, exit: number) => {
    const path = join(dir, name);
    writeFileSync(
      path,
      `#!/bin/sh\nfor a do printf '%s\\n' "$a"; done >${shellWord(join(dir, `${name}.args`))}\nreadlink /proc/self/ns/mnt >${shellWord(join(dir, `${name}.ns`))}\nexit ${exit}\n`,
    );
    chmodSync(path, 0o755);
    return path;
  };
  const delegate = recorder("runc", delegateExit);
  const editor = recorder("cridock it's", editorExit);
  const launcher = join(dir, "launcher");
  writeFileSync(launcher, renderLauncher({ delegate, editsDir: edits, rootfsDir: rootfs, cridock: [editor] }));
  chmodSync(launcher, 0o755);
  const run = (args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) => {
    for (const f of ["runc.args", "cridock it's.args", "runc.ns", "cridock it's.ns"]) rmSync(join(dir, f), { force: true });
    const r = spawnSync(launcher, args, { encoding: "utf8", timeout: 20_000, ...options });
    const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), "utf8").split("\n").slice(0, -1) : undefined);
    return { status: r.status, stderr: r.stderr, runc: read("runc.args"), editor: read("cridock it's.args"), runcNs: read("runc.ns")?.[0], editorNs: read("cridock it's.ns")?.[0] };
  };
  return { dir, edits, rootfs, delegate, launcher, editor, run };
}

const CREATE = ["--root", "/run/docker/runtime-cridock/moby", "--log", "/b/log.json", "--log-format", "json", "--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/b/init.pid", ID];

t.test("a create with recorded edits runs the editor, then the real runtime with every argument", async (t) => {
  const { edits, rootfs, run } = setup(t);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  const r = run(CREATE);
  t.equal(r.status, 0);
  t.same(r.editor, ["oci-edit", "--bundle", "/b", "--edits", join(edits, `${ID}.json`), "--id", ID, "--rootfs-dir", rootfs, "--log", "/b/log.json"]);
  t.same(r.runc, CREATE);
});

t.test("the option forms containerd and runc users write are understood", async (t) => {
  const { edits, run } = setup(t);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  t.same(run(["--log=/l", "create", "--bundle=/x", ID]).editor?.slice(1, 3), ["--bundle", "/x"]);
  t.same(run(["create", "-b", "/y", ID]).editor?.slice(1, 3), ["--bundle", "/y"]);
  t.same(run(["--root", "create", "restore", "--image-path", "/i", "--bundle", "/z", ID]).editor?.slice(1, 3), ["--bundle", "/z"], "a global option's value is not the subcommand");
  // No --bundle: runc takes the working directory, and so does the editor.
  t.same(run(["create", ID]).editor?.slice(1, 3), ["--bundle", "."]);
});

t.test("every other call, and a create with no edits, goes straight to the real runtime", async (t) => {
  const { edits, run } = setup(t);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  for (const args of [["--root", "/r", "state", ID], ["kill", ID, "9"], ["delete", "--force", ID], ["exec", "--process", "/p.json", "--detach", ID], ["--version"]]) {
    const r = run(args);
    t.equal(r.status, 0);
    t.equal(r.editor, undefined, `${args.join(" ")}: no editor`);
    t.same(r.runc, args);
  }
  const other = "b".repeat(64);
  t.equal(run(["create", "--bundle", "/b", other]).editor, undefined, "no edits file for that container");
});

t.test("an id that could be a path never reaches the editor", async (t) => {
  const { edits, run } = setup(t);
  writeFileSync(join(edits, "x.json"), "{}");
  mkdirSync(join(edits, "sub"));
  writeFileSync(join(edits, "sub", "x.json"), "{}");
  t.equal(run(["create", "sub/x"]).editor, undefined);
  t.equal(run(["create", ".x"]).editor, undefined);
});

t.test("a failed edit fails the call: the real runtime never runs the container", async (t) => {
  const { edits, run } = setup(t, 3);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  const r = run(CREATE);
  t.equal(r.status, 1);
  t.ok(r.editor);
  t.equal(r.runc, undefined);
});

t.test("parseLauncher reads back what renderLauncher wrote, and nothing else", async (t) => {
  const text = renderLauncher({ delegate: "/usr/sbin/ru'nc", editsDir: "/run/cridock/oci-edits", rootfsDir: "/run/cridock-rootfs", cridock: ["/usr/bin/cridock"] });
  t.same(parseLauncher(text), { delegate: "/usr/sbin/ru'nc", editsDir: "/run/cridock/oci-edits", rootfsDir: "/run/cridock-rootfs" });
  t.match(text, /^# cridock OCI runtime layer, launcher format 3$/m);
  t.same(parseLauncher(text.replace("launcher format 3", "launcher format 2"))?.rootfsDir, "/run/cridock-rootfs", "format 2's rootfs directory is still read (the sweep and release of its containers need it)");
  const format1 = text.replace("launcher format 3", "launcher format 1").replace(/^ROOTFS_DIR=.*\n/m, "");
  t.same(parseLauncher(format1), { delegate: "/usr/sbin/ru'nc", editsDir: "/run/cridock/oci-edits" }, "an older launcher still serves unified settings, without user namespaces");
  t.throws(() => renderLauncher({ delegate: "/r", editsDir: "/e", cridock: ["/c"] }), /rootfs directory/);
  t.equal(parseLauncher("#!/bin/sh\nexec runc \"$@\"\n"), undefined);
  t.same(parseLauncher(renderLauncher({ delegate: "runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }))?.delegate, "runc", "a bare command name, looked up at each call");
  t.throws(() => renderLauncher({ delegate: "bin/runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /absolute path/);
  t.throws(() => renderLauncher({ delegate: "-runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /absolute path/);
  t.throws(() => renderLauncher({ delegate: "/r\nx", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /printable/);
});

t.test("a delete removes the container's empty directory in the shell, after the real runtime's delete, without cridock", async (t) => {
  const { rootfs, run } = setup(t);
  mkdirSync(join(rootfs, ID, "0"), { recursive: true });
  mkdirSync(join(rootfs, ID, "m"));
  writeFileSync(join(rootfs, ID, "v3"), "");
  const r = run(["--root", "/r", "delete", "--force", ID]);
  t.equal(r.status, 0);
  t.same(r.runc, ["--root", "/r", "delete", "--force", ID]);
  t.equal(r.editor, undefined, "nothing mounted: cridock is not started");
  t.notOk(existsSync(join(rootfs, ID)), "the directory and its empty entries are gone");
  t.equal(run(["delete", "b".repeat(64)]).editor, undefined, "no directory, no cridock");
});

t.test("a failed delete leaves the container's directory as it is, and says the runtime's status", async (t) => {
  const { rootfs, run } = setup(t, 0, 4);
  mkdirSync(join(rootfs, ID, "m"), { recursive: true });
  const r = run(["delete", ID]);
  t.equal(r.status, 4, "the real runtime's status");
  t.ok(r.runc);
  t.ok(existsSync(join(rootfs, ID, "m")), "the container may still exist: its rootfs stays");
});

t.test("a directory the shell cannot empty: the delete still succeeds, and says so", async (t) => {
  const { rootfs, run } = setup(t);
  mkdirSync(join(rootfs, ID), { recursive: true });
  writeFileSync(join(rootfs, ID, "v1"), "not a mount point of ours");
  const r = run(["delete", ID]);
  t.equal(r.status, 0, "containerd would retry a failed delete forever");
  t.match(r.stderr, /could not be removed .*sweep will try again/);
  t.ok(existsSync(join(rootfs, ID, "v1")), "nothing is removed recursively");
});

/** A tmpfs at `target` in the test's own namespace, unmounted when the test ends (before its directory goes). */
const mountinfoMount = (t: Test, target: string): boolean => {
  mkdirSync(target, { recursive: true });
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "cridock-test", target]);
  if (r.status !== 0) return false;
  t.teardown(() => void spawnSync("umount", ["-l", target]));
  return true;
};
const canMount = process.getuid?.() === 0;

t.test("a delete of a container whose mounts a launcher of format 2 left in this namespace calls cridock's release", { skip: !canMount && "mounting needs root" }, async (t) => {
  const { rootfs, run } = setup(t);
  t.ok(mountinfoMount(t, join(rootfs, ID, "m")), "a mount under the container's directory");
  const r = run(["delete", "--force", ID]);
  t.equal(r.status, 0);
  t.same(r.editor, ["oci-edit", "--release", "--id", ID, "--rootfs-dir", rootfs]);
});

t.test("a release that fails after a successful delete fails nothing; a cridock that is gone neither", { skip: !canMount && "mounting needs root" }, async (t) => {
  const failing = setup(t, 3);
  t.ok(mountinfoMount(t, join(failing.rootfs, ID, "m")), "a mount under the container's directory");
  const r = failing.run(["delete", ID]);
  t.equal(r.status, 0);
  t.ok(r.editor, "cridock was asked");
  t.match(r.stderr, /could not be released, and cridock's sweep will try again/);
  rmSync(failing.editor);
  const gone = failing.run(["delete", ID]);
  t.equal(gone.status, 0, "the package removed: the delete still succeeds");
  t.match(gone.stderr, /cridock .* is gone: unmount it by hand/);
});

/** A bundle whose config.json carries the userns mark, written as `text` spells it. */
function markedBundle(dir: string, text = JSON.stringify({ annotations: { "io.cridock.userns": "pod" }, process: { args: ["sh"] } })) {
  const bundle = join(dir, "bundle");
  mkdirSync(bundle, { recursive: true });
  writeFileSync(join(bundle, "config.json"), text);
  writeFileSync(join(bundle, "log.json"), "");
  return bundle;
}

const SPELLINGS = [
  JSON.stringify({ annotations: { "io.cridock.userns": "pod" } }),
  JSON.stringify({ annotations: { "io.cridock.userns": "pod" } }, null, 2),
  '{"annotations": {"io.cridock.userns"\n\t :\r\n "anything"}}',
  '{"annotations":{"x":"y", "io.cridock.userns" : ""}}',
];

t.test("a container marked for its pod's user namespace is never created without cridock's edits, whatever the spelling, subcommand or flags", async (t) => {
  const { dir, run } = setup(t);
  for (const [i, text] of SPELLINGS.entries()) {
    const bundle = markedBundle(dir, text);
    for (const args of [
      ["--log", join(bundle, "log.json"), "create", "--bundle", bundle, ID],
      ["-root", "/r", "-log", join(bundle, "log.json"), "--systemd-cgroup", "create", "-b", bundle, ID],
      ["--root=/r", "--log-format", "json", "--debug", "run", `--bundle=${bundle}`, "--detach", ID],
      ["--criu", "/usr/sbin/criu", "restore", "--image-path", "/i", "--bundle", bundle, ID],
      ["--rootless", "false", "create", "--pid-file", "/p", `-b=${bundle}`, ID],
    ]) {
      const r = run(args);
      t.equal(r.status, 1, `spelling ${i}: ${args.join(" ")}: refused`);
      t.equal(r.runc, undefined, "the real runtime never ran");
      t.match(r.stderr, /belongs in its pod's user namespace and was started without cridock's spec edits/);
    }
  }
  const bundle = join(dir, "bundle");
  t.match(readFileSync(join(bundle, "log.json"), "utf8"), /"level":"error","msg":"cridock OCI layer: container a+ belongs/, "containerd reads why from the runtime's JSON log");
  const implicit = run(["create", ID], { cwd: bundle });
  t.equal(implicit.status, 1, "no --bundle: the working directory's spec is looked at");
  writeFileSync(join(bundle, "config.json"), JSON.stringify({ annotations: { other: "pod" }, process: { args: ["sh"] } }));
  t.equal(run(["create", "--bundle", bundle, ID]).status, 0, "an unmarked container goes on");
});

t.test("any other subcommand given a marked bundle is refused, and one this launcher does not know looks at the working directory", async (t) => {
  const { dir, run } = setup(t);
  const bundle = markedBundle(dir);
  for (const args of [["spec", "--bundle", bundle], ["--root", "/r", "frobnicate", "--bundle", bundle, ID]]) {
    const r = run(args);
    t.equal(r.status, 1, `${args.join(" ")}: refused`);
    t.equal(r.runc, undefined);
  }
  const unknown = run(["--some-new-flag", "value", "create", ID], { cwd: bundle });
  t.equal(unknown.status, 1, "an unknown global flag with a value ('value' taken for the subcommand): still refused");
  t.equal(unknown.runc, undefined);
  t.equal(run(["state", ID], { cwd: bundle }).status, 0, "state, kill, exec and delete take no bundle: they go on");
});

const ownNamespace = (() => {
  const r = spawnSync("unshare", ["--mount", "--propagation", "slave", "true"]);
  return r.status === 0;
})();

t.test("a marked container with edits: cridock's edit and the real runtime's create run in a mount namespace of their own", { skip: !ownNamespace && "unshare --mount needs root here" }, async (t) => {
  const { dir, edits, rootfs, run } = setup(t);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  const bundle = markedBundle(dir, SPELLINGS[1]);
  const args = ["--root", "/r", "--log", join(bundle, "log.json"), "create", "--bundle", bundle, ID];
  const r = run(args);
  t.equal(r.status, 0, r.stderr);
  const host = readlinkSync("/proc/self/ns/mnt");
  t.same(r.editor, ["oci-edit", "--bundle", bundle, "--edits", join(edits, `${ID}.json`), "--id", ID, "--rootfs-dir", rootfs, "--outer-mntns", host, "--log", join(bundle, "log.json")]);
  t.same(r.runc, args, "the real runtime gets every argument");
  t.not(r.editorNs, host, "the edit does not run in its caller's mount namespace");
  t.equal(r.runcNs, r.editorNs, "the real runtime's create runs in the same one as the edit");
  const failed = setup(t, 5);
  writeFileSync(join(failed.edits, `${ID}.json`), "{}");
  const f = failed.run(["create", "--bundle", markedBundle(failed.dir), ID]);
  t.equal(f.status, 1, "a failed edit fails the create");
  t.equal(f.runc, undefined);
});

t.test("a marked create whose edit fails or is killed takes away what the edit left of the container's directory", { skip: !ownNamespace && "unshare --mount needs root here" }, async (t) => {
  // Exit 137: the edit killed with -9 after it made the mount points (made here before the call).
  const { dir, edits, rootfs, run } = setup(t, 137);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  for (const entry of ["m", "v6", "v11"]) mkdirSync(join(rootfs, ID, entry), { recursive: true });
  const r = run(["create", "--bundle", markedBundle(dir), ID]);
  t.equal(r.status, 1, "the create fails");
  t.equal(r.runc, undefined, "the real runtime never ran");
  t.notOk(existsSync(join(rootfs, ID)), "the directory and its empty mount points are gone, with no delete to come");
  t.equal(r.stderr, "", "and nothing to warn of");
  // One that failed before it made anything: nothing to take away, nothing said.
  const early = run(["create", "--bundle", markedBundle(dir), ID]);
  t.equal(early.status, 1);
  t.equal(early.stderr, "");
  // A file left there by someone else is not emptied: the directory stays, and the launcher says so.
  mkdirSync(join(rootfs, ID));
  writeFileSync(join(rootfs, ID, "kept"), "data");
  const kept = run(["create", "--bundle", markedBundle(dir), ID]);
  t.equal(kept.status, 1);
  t.equal(readFileSync(join(rootfs, ID, "kept"), "utf8"), "data", "a file with content is never removed");
  t.match(kept.stderr, /could not be removed/);
});

t.test("a marked create refuses to go on outside a namespace of its own", async (t) => {
  const { dir, edits, run } = setup(t);
  writeFileSync(join(edits, `${ID}.json`), "{}");
  const bundle = markedBundle(dir);
  const stale = run(["create", "--bundle", bundle, ID], { env: { ...process.env, CRIDOCK_OCI_OUTER_MNTNS: "mnt:[1]" } });
  t.equal(stale.status, 1, "a marker that does not name its caller's namespace: refused, never trusted");
  t.match(stale.stderr, /was to be created in a mount namespace of its own/);
  t.equal(stale.editor, undefined);
  // A PATH with the shell's tools and no unshare.
  const bin = join(dir, "bin");
  mkdirSync(bin);
  for (const tool of ["tr", "grep", "readlink", "sed"]) {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
    if (found) symlinkSync(found, join(bin, tool));
  }
  const none = run(["create", "--bundle", bundle, ID], { env: { PATH: bin } });
  t.equal(none.status, 1);
  t.match(none.stderr, /unshare is not on the PATH/);
  t.equal(none.editor, undefined);
});

t.test("a launcher whose real runtime leads back to itself refuses instead of looping", async (t) => {
  const { dir, launcher } = setup(t);
  const looping = join(dir, "looping");
  writeFileSync(looping, renderLauncher({ delegate: launcher, editsDir: join(dir, "edits"), rootfsDir: join(dir, "rootfs"), cridock: ["/nonexistent"] }));
  chmodSync(looping, 0o755);
  const self = join(dir, "self");
  writeFileSync(self, readFileSync(looping, "utf8").replace(/^DELEGATE=.*$/m, `DELEGATE=${shellWord(self)}`));
  chmodSync(self, 0o755);
  const r = spawnSync(self, ["state", ID], { encoding: "utf8", timeout: 10_000 });
  t.equal(r.status, 1, "refused, not looping");
  t.match(r.stderr, /ran the layer again/);
});

t.test("a real runtime named, not pathed, is the one on the PATH of each call: an engine replaced later brings its own runc", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cridock-launcher-path-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const launcher = join(dir, "launcher");
  writeFileSync(launcher, renderLauncher({ delegate: "runc", editsDir: join(dir, "edits"), rootfsDir: join(dir, "rootfs"), cridock: ["/nonexistent/cridock"] }));
  chmodSync(launcher, 0o755);
  const engine = (name: string) => {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, "runc"), `#!/bin/sh\necho ${name} "$@"\n`);
    chmodSync(join(dir, name, "runc"), 0o755);
    return join(dir, name);
  };
  const [first, second] = [engine("distro"), engine("docker-ce")];
  const call = (path: string) => spawnSync(launcher, ["--version"], { encoding: "utf8", env: { PATH: path } });
  t.equal(call(first).stdout, "distro --version\n");
  t.equal(call(second).stdout, "docker-ce --version\n", "the same launcher, the other engine's runc");
  const none = call(join(dir, "nowhere"));
  t.not(none.status, 0, "no runc on the PATH: the call fails, as Docker's own would");
});
