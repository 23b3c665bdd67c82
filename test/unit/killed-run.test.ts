/**
 * scripts/env/killed-run.sh on what a killed e2e file leaves: a scratch
 * directory whose pinned network namespace keeps a veth on the test bridge
 * (the pod process gone, the bind mount holding the namespace). The script
 * must unmount it, so the namespace and the veth go, delete the bridge and
 * the directory; and it must leave alone a scratch directory that a live
 * process still names. Its own TMPDIR and bridge name keep it off the
 * machine's. Needs root, unshare, mount and ip.
 */
import t from "tap";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = process.getuid?.() === 0;
const SCRIPT = join(import.meta.dirname, "../../scripts/env/killed-run.sh");
const BRIDGE = "cridock-kr0";

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
const mounted = (path: string) => sh("cat", "/proc/self/mountinfo").split("\n").some((l) => l.split(" ")[4] === path);
const linkExists = (name: string) => spawnSync("ip", ["link", "show", name], { stdio: "ignore" }).status === 0;
const exists = (path: string) => stat(path).then(() => true, () => false);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A process in a new network namespace; resolves once it is in it. */
async function inNewNetns(): Promise<ReturnType<typeof spawn>> {
  const child = spawn("unshare", ["-n", "sleep", "60"], { stdio: "ignore" });
  const ours = sh("readlink", "/proc/self/ns/net").trim();
  for (let i = 0; i < 200; i++) {
    const theirs = spawnSync("readlink", [`/proc/${child.pid}/ns/net`], { encoding: "utf8" }).stdout.trim();
    if (theirs && theirs !== ours) return child;
    await sleep(20);
  }
  child.kill("SIGKILL");
  throw new Error("unshare -n never entered its namespace");
}

t.test("a killed run's pinned namespace, veth and bridge are cleared; a live run's scratch stays", { skip: root ? false : "needs root" }, async (t) => {
  const parent = await mkdtemp(join(tmpdir(), "killed-run-"));
  const stale = join(parent, "cridock-e2e-stale");
  const live = join(parent, "cridock-e2e-live");
  const handle = join(stale, "cridock", "netns", "sandbox1");
  const veth = "cridock-krv0";
  const keeper = spawn("bash", ["-c", `sleep 60; : ${live}`], { stdio: "ignore" });
  t.teardown(async () => {
    keeper.kill("SIGKILL");
    spawnSync("umount", ["-l", handle]);
    spawnSync("umount", ["-l", join(live, "m")]);
    spawnSync("ip", ["link", "delete", veth]);
    spawnSync("ip", ["link", "delete", BRIDGE]);
    await rm(parent, { recursive: true, force: true });
  });

  // The killed run's pod: its netns pinned under the scratch, a veth to the bridge, the process gone.
  await mkdir(join(stale, "cridock", "netns"), { recursive: true });
  await writeFile(handle, "");
  const pod = await inNewNetns();
  sh("mount", "--bind", `/proc/${pod.pid}/ns/net`, handle);
  sh("ip", "link", "add", BRIDGE, "type", "bridge");
  sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", `/proc/${pod.pid}/ns/net`);
  sh("ip", "link", "set", veth, "master", BRIDGE);
  pod.kill("SIGKILL");
  await new Promise((r) => pod.once("exit", r));
  t.ok(linkExists(veth), "the pinned namespace keeps the veth after its process is gone");

  // A run still going on: a mount under its scratch, and a process naming it.
  await mkdir(join(live, "m"), { recursive: true });
  sh("mount", "-t", "tmpfs", "none", join(live, "m"));

  const r = spawnSync("bash", [SCRIPT], { encoding: "utf8", env: { ...process.env, TMPDIR: parent, CRIDOCK_KILLED_RUN_BRIDGES: BRIDGE }, timeout: 60_000 });
  t.equal(r.status, 0, `killed-run.sh exits 0 (stderr: ${r.stderr.trim()})`);
  t.notOk(mounted(handle), "the namespace handle is unmounted");
  t.notOk(await exists(stale), "the killed run's scratch directory is removed");
  t.notOk(linkExists(veth), "its veth went with the namespace");
  t.notOk(linkExists(BRIDGE), "the emptied bridge is deleted");
  t.ok(mounted(join(live, "m")), "the live run's mount stays");
  t.ok(await exists(live), "the live run's scratch directory stays");
});
