/**
 * scripts/vm/engine.sh's daemon.json merge (engine_daemon_json): the image
 * store of the node's Engine 29 goes into what the guest's daemon.json
 * holds (cridock's OCI layer registers its runtime there, the checkpoint
 * test its experimental mode), and a file that is not a JSON object is
 * refused, never replaced.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const ENGINE_SH = fileURLToPath(new URL("../../scripts/vm/engine.sh", import.meta.url));

function merge(current: string, snapshotter: "true" | "false" | "none") {
  const r = spawnSync("bash", ["-c", `source "$0"; engine_daemon_json "$1" "$2"`, ENGINE_SH, current, snapshotter], { encoding: "utf8" });
  return { status: r.status, config: r.status === 0 ? (JSON.parse(r.stdout) as Record<string, unknown>) : undefined, stderr: r.stderr };
}

t.test("an empty or absent file gets the image store alone", async (t) => {
  t.same(merge("", "true").config, { features: { "containerd-snapshotter": true } });
  t.same(merge("  \n", "false").config, { features: { "containerd-snapshotter": false } });
});

t.test("the operator's keys and other features are kept, in their order", async (t) => {
  const current = JSON.stringify({ runtimes: { cridock: { path: "/var/lib/cridock/oci-runtime" } }, features: { "other-feature": true }, experimental: true });
  const { config } = merge(current, "true");
  t.same(config, { runtimes: { cridock: { path: "/var/lib/cridock/oci-runtime" } }, features: { "other-feature": true, "containerd-snapshotter": true }, experimental: true });
  t.same(Object.keys(config!), ["runtimes", "features", "experimental"]);
});

t.test("back to the release's engine: the image store key goes, an emptied features object too", async (t) => {
  t.same(merge(JSON.stringify({ features: { "containerd-snapshotter": true } }), "none").config, {});
  t.same(merge(JSON.stringify({ features: { "containerd-snapshotter": false, x: 1 }, debug: true }), "none").config, { features: { x: 1 }, debug: true });
});

t.test("a file that is not a JSON object is refused with one line", async (t) => {
  for (const bad of ["[1]", "{not json", "null", '"text"']) {
    const r = merge(bad, "true");
    t.equal(r.status, 1, bad);
    t.equal(r.stderr, "vm-node: daemon.json is not a JSON object\n", bad);
  }
});
