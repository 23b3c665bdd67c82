import t, { type Test } from "tap";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseLauncher, renderLauncher, shellWord } from "../../../src/oci/launcher.ts";

const ID = "a".repeat(64);

/**
 * The launcher run by a real /bin/sh, with a fake real runtime and a fake
 * cridock that each record their arguments (one per line).
 */
function setup(t: Test, editorExit = 0) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-launcher-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const edits = join(dir, "edits");
  mkdirSync(edits);
  const rootfs = join(dir, "rootfs");
  mkdirSync(rootfs);
  const recorder = (name: string, exit: number) => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\nfor a do printf '%s\\n' "$a"; done >${shellWord(join(dir, `${name}.args`))}\nexit ${exit}\n`);
    chmodSync(path, 0o755);
    return path;
  };
  const delegate = recorder("runc", 0);
  const editor = recorder("cridock it's", editorExit);
  const launcher = join(dir, "launcher");
  writeFileSync(launcher, renderLauncher({ delegate, editsDir: edits, rootfsDir: rootfs, cridock: [editor] }));
  chmodSync(launcher, 0o755);
  const run = (args: string[]) => {
    for (const f of ["runc.args", "cridock it's.args"]) rmSync(join(dir, f), { force: true });
    const r = spawnSync(launcher, args, { encoding: "utf8" });
    const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), "utf8").split("\n").slice(0, -1) : undefined);
    return { status: r.status, runc: read("runc.args"), editor: read("cridock it's.args") };
  };
  return { dir, edits, rootfs, delegate, run };
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
  const format1 = text.replace("launcher format 2", "launcher format 1").replace(/^ROOTFS_DIR=.*\n/m, "");
  t.same(parseLauncher(format1), { delegate: "/usr/sbin/ru'nc", editsDir: "/run/cridock/oci-edits" }, "an older launcher still serves unified settings, without user namespaces");
  t.throws(() => renderLauncher({ delegate: "/r", editsDir: "/e", cridock: ["/c"] }), /rootfs directory/);
  t.equal(parseLauncher("#!/bin/sh\nexec runc \"$@\"\n"), undefined);
  t.same(parseLauncher(renderLauncher({ delegate: "runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }))?.delegate, "runc", "a bare command name, looked up at each call");
  t.throws(() => renderLauncher({ delegate: "bin/runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /absolute path/);
  t.throws(() => renderLauncher({ delegate: "-runc", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /absolute path/);
  t.throws(() => renderLauncher({ delegate: "/r\nx", editsDir: "/e", rootfsDir: "/f", cridock: ["/c"] }), /printable/);
});

t.test("a delete of a container with an idmapped rootfs releases it after the real runtime's delete", async (t) => {
  const { rootfs, run } = setup(t);
  mkdirSync(join(rootfs, ID));
  const r = run(["--root", "/r", "delete", "--force", ID]);
  t.equal(r.status, 0);
  t.same(r.runc, ["--root", "/r", "delete", "--force", ID]);
  t.same(r.editor, ["oci-edit", "--release", "--id", ID, "--rootfs-dir", rootfs]);
  t.equal(run(["delete", "b".repeat(64)]).editor, undefined, "no directory, no cridock");
});

t.test("a container marked for its pod's user namespace is never created without cridock's edits", async (t) => {
  const { dir, run } = setup(t);
  const bundle = join(dir, "bundle");
  mkdirSync(bundle);
  writeFileSync(join(bundle, "config.json"), JSON.stringify({ annotations: { "io.cridock.userns": "pod" }, process: { args: ["sh"] } }));
  writeFileSync(join(bundle, "log.json"), "");
  const r = run(["--log", join(bundle, "log.json"), "create", "--bundle", bundle, ID]);
  t.equal(r.status, 1);
  t.equal(r.runc, undefined, "the real runtime never ran");
  t.match(readFileSync(join(bundle, "log.json"), "utf8"), /belongs in its pod's user namespace/);
  writeFileSync(join(bundle, "config.json"), JSON.stringify({ annotations: { other: "pod" }, process: { args: ["sh"] } }));
  t.equal(run(["create", "--bundle", bundle, ID]).status, 0, "an unmarked container goes on");
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
