/**
 * daemon.json written as an operator would (src/oci/daemon-json-file.ts,
 * file-lock.ts): mode and owner kept, a symlink kept a symlink, refusals
 * leave the file untouched, and cridock's concurrent runs take turns.
 */
import t, { type Test } from "tap";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync, chownSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { withRuntime, withoutRuntime } from "../../../src/oci/daemon-config.ts";
import { changeDaemonJson, lockPathFor } from "../../../src/oci/daemon-json-file.ts";
import { withFileLock } from "../../../src/oci/file-lock.ts";
import { registerInDaemonJson } from "../../../src/oci/registration.ts";

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), "cridock-daemon-json-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const add = (launcher: string) => (text: string | undefined) => withRuntime(text, "cridock", launcher);
const isRoot = process.getuid?.() === 0;

t.test("the file keeps its mode and owner (it may hold proxy credentials)", async (t) => {
  const dir = tempDir(t);
  const file = join(dir, "daemon.json");
  writeFileSync(file, JSON.stringify({ proxies: { "http-proxy": "http://user:secret@proxy:3128" } }), { mode: 0o600 });
  if (isRoot) chownSync(file, 1234, 5678);
  const before = statSync(file);
  const { written } = await changeDaemonJson(file, add("/var/lib/cridock/oci-runtime"));
  t.equal(written, file);
  const after = statSync(file);
  t.equal(after.mode & 0o7777, 0o600, "still 0600, not 0644");
  t.equal(after.uid, before.uid, "owner kept");
  t.equal(after.gid, before.gid, "group kept");
  t.not(after.ino, before.ino, "replaced by a rename, not written in place");
  t.same(JSON.parse(readFileSync(file, "utf8")), { proxies: { "http-proxy": "http://user:secret@proxy:3128" }, runtimes: { cridock: { path: "/var/lib/cridock/oci-runtime" } } });
  t.same(readdirSync(dir), ["daemon.json"], "no temporary or lock file left");
  // A new file is 0644.
  const fresh = join(dir, "fresh.json");
  await changeDaemonJson(fresh, add("/l"));
  t.equal(statSync(fresh).mode & 0o777, 0o644);
});

t.test("a symlinked daemon.json stays a symlink: its target is rewritten, beside the target", async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, "etc-docker"));
  mkdirSync(join(dir, "managed"));
  const target = join(dir, "managed", "daemon.json");
  writeFileSync(target, '{"debug":true}', { mode: 0o640 });
  const link = join(dir, "etc-docker", "daemon.json");
  symlinkSync("../managed/daemon.json", link);
  const { written } = await changeDaemonJson(link, add("/l"));
  t.equal(written, target);
  t.ok(lstatSync(link).isSymbolicLink(), "still a symlink");
  t.equal(readlinkSync(link), "../managed/daemon.json", "pointing where it did");
  t.same(JSON.parse(readFileSync(target, "utf8")), { debug: true, runtimes: { cridock: { path: "/l" } } });
  t.equal(statSync(target).mode & 0o777, 0o640);
  t.same(readdirSync(join(dir, "etc-docker")), ["daemon.json"], "nothing written beside the link");
  t.same(readdirSync(join(dir, "managed")), ["daemon.json"], "nothing left beside the target");
  // A link to a file that does not exist yet: the target is created, the link kept.
  const dangling = join(dir, "etc-docker", "other.json");
  symlinkSync("../managed/other.json", dangling);
  await changeDaemonJson(dangling, add("/l"));
  t.ok(lstatSync(dangling).isSymbolicLink());
  t.same(JSON.parse(readFileSync(join(dir, "managed", "other.json"), "utf8")), { runtimes: { cridock: { path: "/l" } } });
  // A loop is refused.
  symlinkSync("loop-b", join(dir, "loop-a"));
  symlinkSync("loop-a", join(dir, "loop-b"));
  await t.rejects(changeDaemonJson(join(dir, "loop-a"), add("/l")), /more than 40 symbolic links/);
});

t.test("refusals leave the file untouched: malformed JSON, a default-runtime of cridock", async (t) => {
  const dir = tempDir(t);
  const file = join(dir, "daemon.json");
  for (const text of ["{ nope", "[1]", '{"runtimes":"runc"}', '{"default-runtime":"cridock","runtimes":{"cridock":{"path":"/l"}}}']) {
    writeFileSync(file, text, { mode: 0o600 });
    const before = statSync(file);
    await t.rejects(changeDaemonJson(file, add("/l")), /not JSON|not a JSON object|not an object|default-runtime/, text);
    const after = statSync(file);
    t.equal(readFileSync(file, "utf8"), text, `${text}: unchanged`);
    t.equal(after.ino, before.ino, `${text}: the same file`);
    t.same(readdirSync(dir), ["daemon.json"], `${text}: no lock or temporary file left`);
  }
  t.throws(() => withRuntime('{"default-runtime":"cridock"}', "cridock", "/l", "/etc/docker/daemon.json"), /\/etc\/docker\/daemon.json makes "cridock" dockerd's default-runtime.*set "default-runtime" back to "runc"/);
  t.throws(() => withoutRuntime('{"default-runtime":"cridock","runtimes":{"cridock":{"path":"/l"}}}', "cridock"), /default-runtime/, "removing the default runtime is refused too");
  t.equal(withoutRuntime('{"default-runtime":"cridock"}', "cridock"), undefined, "nothing to remove: nothing refused");
  t.doesNotThrow(() => withRuntime('{"default-runtime":"runc"}', "cridock", "/l"));
});

t.test("two concurrent installs in one process take turns: neither loses the other's change", async (t) => {
  const dir = tempDir(t);
  const file = join(dir, "daemon.json");
  writeFileSync(file, '{"debug":true}');
  const order: string[] = [];
  // Each reads, waits (as a slow disk would), then writes: without the lock both read the same file and one change is lost.
  const slowAdd = (name: string) => async (text: string | undefined) => {
    order.push(`read ${name}`);
    await sleep(150);
    const config = JSON.parse(text ?? "{}");
    order.push(`write ${name}`);
    return JSON.stringify({ ...config, runtimes: { ...config.runtimes, [name]: { path: `/${name}` } } });
  };
  await Promise.all([changeDaemonJson(file, slowAdd("first"), { pollMs: 10 }), changeDaemonJson(file, slowAdd("second"), { pollMs: 10 })]);
  t.same(Object.keys(JSON.parse(readFileSync(file, "utf8")).runtimes).sort(), ["first", "second"], "both changes are in the file");
  t.same(order.map((o) => o.split(" ")[0]), ["read", "write", "read", "write"], `one after the other (${order.join(", ")})`);
  // The same through registration.ts, as `oci-layer install` and the server's re-registration write it.
  const registration = { launcher: "/var/lib/cridock/oci-runtime", daemonJson: file, dockerPidFile: join(dir, "docker.pid"), delegate: "runc", editsDir: "/run/e", rootfsDir: "/run/r" };
  const results = await Promise.all([registerInDaemonJson(registration), registerInDaemonJson(registration)]);
  t.same(results.sort(), [false, true], "one of two identical installs changes the file, the other finds it done");
  t.same(readdirSync(dir), ["daemon.json"], "no lock or temporary file left");
});

t.test("the lock: a live holder is waited for and named; a dead one's lock is taken over", async (t) => {
  const dir = tempDir(t);
  const lock = join(dir, "daemon.json.cridock-lock");
  // A live holder: init, which runs as long as the machine does (a child process of the test's own could die under load).
  const holder = { pid: 1 };
  writeFileSync(lock, `${holder.pid}\n`);
  await t.rejects(withFileLock(lock, async () => "ran", { timeoutMs: 300, pollMs: 20 }), new RegExp(`held by process ${holder.pid} for more than`));
  t.equal(readFileSync(lock, "utf8"), `${holder.pid}\n`, "a live holder's lock is left alone");
  // It lets go while we wait: we get it.
  setTimeout(() => rmSync(lock), 100);
  t.equal(await withFileLock(lock, async () => "ran", { timeoutMs: 5000, pollMs: 20 }), "ran");
  // A holder that died: its lock is stale and taken over at once.
  // (A pid above the kernel's pid_max: no process has it, now or later, whatever else runs on the machine.)
  const dead = { stdout: String(Number(readFileSync("/proc/sys/kernel/pid_max", "utf8").trim()) + 1) };
  writeFileSync(lock, `${dead.stdout}\n`);
  t.equal(await withFileLock(lock, async () => "ran", { timeoutMs: 200, pollMs: 20 }), "ran", "a dead holder's lock is taken over");
  // Our pid, reused: the start time differs, so it is not us (nor alive).
  writeFileSync(lock, `${process.pid} 1\n`);
  t.equal(await withFileLock(lock, async () => "ran", { timeoutMs: 200, pollMs: 20 }), "ran", "a reused pid's lock is taken over");
  t.same(readdirSync(dir), [], "released: nothing left");
  // A lock file cridock did not write is never taken over.
  writeFileSync(lock, "someone else's\n");
  await t.rejects(withFileLock(lock, async () => "ran", { timeoutMs: 150, pollMs: 20 }), /held by an unknown process/);
  t.equal(readFileSync(lock, "utf8"), "someone else's\n");
  rmSync(lock);
  // Two waiters over one stale lock: exactly one at a time holds it.
  let inside = 0;
  let most = 0;
  const critical = async () => {
    inside++;
    most = Math.max(most, inside);
    await sleep(50);
    inside--;
  };
  for (let round = 0; round < 20; round++) {
    writeFileSync(lock, `${dead.stdout}\n`);
    await Promise.all(Array.from({ length: 6 }, () => withFileLock(lock, critical, { timeoutMs: 10_000, pollMs: 1 })));
  }
  t.equal(most, 1, "never two holders at once, over 20 rounds of 6 waiters");
  t.same(readdirSync(dir), [], "nothing left");
  // A stale lock whose break another waiter holds (a fresh break lock) is not broken twice: wait.
  writeFileSync(lock, `${dead.stdout}\n`);
  writeFileSync(`${lock}.break`, "");
  await t.rejects(withFileLock(lock, async () => "ran", { timeoutMs: 100, pollMs: 10 }), /held by an unknown process/);
  rmSync(`${lock}.break`);
  t.equal(await withFileLock(lock, async () => "ran", { timeoutMs: 1000, pollMs: 10 }), "ran");
});

t.test("a daemon.json whose directory does not exist: install makes it, uninstall leaves none", async (t) => {
  const dir = tempDir(t);
  const missing = join(dir, "etc-docker", "daemon.json");
  t.same(await changeDaemonJson(missing, (text) => withoutRuntime(text, "cridock")), {}, "uninstall: nothing to do");
  t.notOk(existsSync(join(dir, "etc-docker")), "and no directory made");
  await t.rejects(changeDaemonJson(missing, add("/l")), /does not exist/, "a write without createDirectory is refused");
  const registration = { launcher: "/l", daemonJson: missing, dockerPidFile: join(dir, "docker.pid"), delegate: "runc", editsDir: "/run/e", rootfsDir: "/run/r" };
  t.equal(await registerInDaemonJson(registration), true, "install makes the directory and the file");
  t.equal(statSync(join(dir, "etc-docker")).mode & 0o777, 0o755);
  t.same(JSON.parse(readFileSync(missing, "utf8")), { runtimes: { cridock: { path: "/l" } } });
});

t.test("the lock lives beside the resolved target", async (t) => {
  t.equal(lockPathFor("/etc/docker/daemon.json"), "/etc/docker/daemon.json.cridock-lock");
});
