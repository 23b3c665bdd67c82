import t from "tap";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleProcessEnv, cdiOnlyEnv, hasCdiDevices } from "../../../../src/runtime/exec/cdi-env.ts";

const ID = "a".repeat(64);

t.test("cdiOnlyEnv: what the spec has beyond Config.Env and Docker's own variables", async (t) => {
  const spec = ["PATH=/usr/bin", "HOSTNAME=pod", "APP=1", "NVIDIA_VISIBLE_DEVICES=0", "TERM=xterm", "SHARED=from-config", "broken"];
  t.same(cdiOnlyEnv(spec, ["APP=1", "SHARED=other"]), ["NVIDIA_VISIBLE_DEVICES=0"]);
  t.same(cdiOnlyEnv([], ["A=1"]), []);
});

t.test("hasCdiDevices: a cdi device request with devices", async (t) => {
  t.ok(hasCdiDevices({ HostConfig: { DeviceRequests: [{ Driver: "cdi", DeviceIDs: ["vendor.com/gpu=0"] }] } }));
  t.notOk(hasCdiDevices({ HostConfig: { DeviceRequests: [{ Driver: "nvidia", DeviceIDs: ["0"] }] } }));
  t.notOk(hasCdiDevices({ HostConfig: {} }));
});

t.test("bundleProcessEnv: the spec of the bundle that is the shim's working directory, named for the container", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cridock-cdi-env-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const proc = join(root, "proc");
  const bundle = join(root, "moby", ID);
  mkdirSync(bundle, { recursive: true });
  writeFileSync(join(bundle, "config.json"), JSON.stringify({ process: { env: ["A=1", 5, "B=2"] } }));
  mkdirSync(join(proc, "100"), { recursive: true });
  mkdirSync(join(proc, "50"), { recursive: true });
  // A command name with spaces and parentheses: the fields are counted after the last ")".
  writeFileSync(join(proc, "100", "stat"), "100 (sh (x) y) S 50 100 100 0 -1");
  symlinkSync(bundle, join(proc, "50", "cwd"));
  t.same(await bundleProcessEnv(ID, 100, proc), ["A=1", "B=2"]);
  t.equal(await bundleProcessEnv("b".repeat(64), 100, proc), undefined, "another container's bundle");
  t.equal(await bundleProcessEnv(ID, 0, proc), undefined);
  t.equal(await bundleProcessEnv(ID, 7, proc), undefined, "no such process");
  writeFileSync(join(proc, "100", "stat"), "100 (sh) S 1 100 100 0 -1");
  t.equal(await bundleProcessEnv(ID, 100, proc), undefined, "reparented to init: no shim");
});
