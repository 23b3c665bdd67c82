import t, { type Test } from "tap";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderLauncher } from "../../../src/oci/launcher.ts";
import { inspectLayer, OciLayerLookup } from "../../../src/oci/layer.ts";

function files(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-layer-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const runc = join(dir, "runc");
  writeFileSync(runc, "#!/bin/sh\n");
  chmodSync(runc, 0o755);
  const launcher = join(dir, "launcher");
  writeFileSync(launcher, renderLauncher({ delegate: runc, editsDir: join(dir, "edits"), rootfsDir: join(dir, "rootfs"), cridock: ["/usr/bin/cridock"] }));
  return { dir, runc, launcher };
}

t.test("inspectLayer: ready only for a registered launcher cridock wrote, with a runtime that exists", async (t) => {
  const { dir, runc, launcher } = files(t);
  t.same(await inspectLayer({ Runtimes: { cridock: { path: launcher } } }), { ready: true, layer: { runtime: "cridock", launcher, delegate: runc, editsDir: join(dir, "edits"), rootfsDir: join(dir, "rootfs") } });
  t.match(await inspectLayer({ Runtimes: { runc: { path: "runc" } } }), { ready: false, reason: /no runtime named "cridock": run `cridock oci-layer install`/ });
  t.match(await inspectLayer({}), { ready: false });
  t.match(await inspectLayer({ Runtimes: { cridock: { path: "cridock-runtime" } } }), { ready: false, reason: /not the path/ });
  t.match(await inspectLayer({ Runtimes: { cridock: { path: join(dir, "missing") } } }), { ready: false, reason: /cannot be read/ });
  t.match(await inspectLayer({ Runtimes: { cridock: { path: runc } } }), { ready: false, reason: /not a launcher cridock wrote/ });
  rmSync(runc);
  t.match(await inspectLayer({ Runtimes: { cridock: { path: launcher } } }), { ready: false, reason: /real runtime .* is not an executable/ });
});

t.test("OciLayerLookup asks dockerd once per period and says once that the layer is missing", async (t) => {
  const { launcher } = files(t);
  let calls = 0;
  let registered = false;
  const told: string[] = [];
  const lookup = new OciLayerLookup(
    async () => {
      calls++;
      const runtimes: Record<string, { path: string }> = registered ? { cridock: { path: launcher } } : {};
      return { Runtimes: runtimes };
    },
    (reason) => told.push(reason),
  );
  t.equal(await lookup.current({ quiet: true }), undefined);
  t.equal(told.length, 0, "quiet: nothing said");
  (lookup as unknown as { cached?: unknown }).cached = undefined;
  calls = 0;
  t.equal(await lookup.current(), undefined);
  t.equal(await lookup.current(), undefined);
  t.equal(calls, 1, "cached");
  t.equal(told.length, 1);
  registered = true;
  // The absence is trusted for 15 s; past that, dockerd is asked again.
  (lookup as unknown as { cached?: unknown }).cached = undefined;
  t.equal((await lookup.current())?.runtime, "cridock");
  t.equal(calls, 2);
  t.equal(told.length, 1, "said once");
});
