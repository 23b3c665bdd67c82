/**
 * loopbackIsUp (src/network/netns.ts) tells from procfs whether a network
 * namespace's lo is up with 127.0.0.1, which decides whether RunPodSandbox
 * runs the loopback CNI plugin. Checked on a real, fresh namespace (lo down),
 * then with lo brought up, then down again (the address stays: the check
 * must still say down). Needs root, unshare, nsenter and ip.
 */
import t from "tap";
import { execFileSync, spawn } from "node:child_process";
import { loopbackIsUp } from "../../src/network/netns.ts";

const root = process.getuid?.() === 0;

t.test("lo of a fresh namespace, brought up, brought down", { skip: root ? false : "needs root for unshare -n" }, async (t) => {
  const child = spawn("unshare", ["-n", "sleep", "30"], { stdio: "ignore" });
  t.teardown(() => void child.kill("SIGKILL"));
  // unshare execs sleep in the new namespace: wait until the pid's netns differs from ours.
  const ours = execFileSync("readlink", ["/proc/self/ns/net"]).toString().trim();
  for (let i = 0; i < 100; i++) {
    let theirs = "";
    try {
      theirs = execFileSync("readlink", [`/proc/${child.pid}/ns/net`]).toString().trim();
    } catch {
      // not there yet
    }
    if (theirs && theirs !== ours) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const ip = (...args: string[]) => execFileSync("nsenter", [`--net=/proc/${child.pid}/ns/net`, "ip", ...args]);
  t.equal(await loopbackIsUp(child.pid!), false, "fresh namespace: lo is down");
  ip("link", "set", "lo", "up");
  t.equal(await loopbackIsUp(child.pid!), true, "lo up with 127.0.0.1");
  ip("link", "set", "lo", "down");
  t.equal(await loopbackIsUp(child.pid!), false, "lo down again, address kept: down");
});

t.test("a pid that does not exist or is not a pid: cannot tell, so false", async (t) => {
  t.equal(await loopbackIsUp(0), false);
  t.equal(await loopbackIsUp(-1), false);
  t.equal(await loopbackIsUp(2 ** 31), false);
});
