/**
 * liveNetns (src/network/netns.ts) decides whether CNI DEL gets the pod's
 * namespace path or, the namespace being gone, an empty CNI_NETNS as the
 * CNI spec has runtimes pass it: a path counts only while it is a network
 * namespace (nsfs), not a plain file left where a handle was unmounted.
 */
import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { liveNetns } from "../../src/network/netns.ts";

t.test("a live namespace path is kept; a plain file, a missing path and no path are gone", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-netns-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const unmounted = join(dir, "handle");
  await writeFile(unmounted, "");
  t.equal(await liveNetns("/proc/self/ns/net"), "/proc/self/ns/net", "our own namespace is live");
  t.equal(await liveNetns(unmounted), "", "a handle file that is no longer a mount");
  t.equal(await liveNetns(join(dir, "missing")), "", "a path that does not exist");
  t.equal(await liveNetns("/proc/999999999/ns/net"), "", "the namespace of a process that is gone");
  t.equal(await liveNetns(""), "", "no path at all");
});
