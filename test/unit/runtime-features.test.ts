/**
 * Status' RuntimeFeatures.mount_options: true only where dockerd has
 * cridock's OCI runtime layer registered and its launcher is one cridock
 * wrote (oci/layer.ts); false without it, and false when the answer cannot
 * be had. dockerd is a fake info source; the launcher file is real.
 */
import t, { type Test } from "tap";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderLauncher } from "../../src/oci/launcher.ts";
import { OciLayerLookup } from "../../src/oci/layer.ts";
import { mountOptionsSupport } from "../../src/oci/mount-options.ts";
import { RuntimeStatus } from "../../src/runtime/status.ts";
import { runtimeInfoRpcs } from "../../src/cri/runtime-info-rpcs.ts";
import type { UnaryHandler } from "../../src/cri/handlers.ts";
import type { DockerClient } from "../../src/docker/client.ts";
import type { NetworkReadinessSource } from "../../src/network/plugin.ts";

function launcherFile(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), "cridock-features-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const runc = join(dir, "runc");
  writeFileSync(runc, "#!/bin/sh\n");
  chmodSync(runc, 0o755);
  const launcher = join(dir, "launcher");
  writeFileSync(launcher, renderLauncher({ delegate: runc, editsDir: join(dir, "edits"), rootfsDir: join(dir, "rootfs"), cridock: ["/usr/bin/cridock"] }));
  writeFileSync(join(dir, "other"), "#!/bin/sh\nexec runc \"$@\"\n");
  return launcher;
}

/** The Status RPC over a RuntimeStatus whose dockerd answers /info with `runtimes`. */
function statusOf(runtimes: () => Promise<Record<string, { path: string }>>) {
  const info = async () => ({ Runtimes: await runtimes(), KernelVersion: "6.12.0", CgroupDriver: "systemd" });
  const docker = {
    events: { connected: false, epoch: 0, onConnection: () => () => undefined },
    ping: async () => undefined,
    info,
    apiVersion: async () => "1.52",
  } as unknown as DockerClient;
  const network = { readiness: () => ({ ready: true }) } as unknown as NetworkReadinessSource;
  const lookup = new OciLayerLookup(info, () => undefined);
  const status = new RuntimeStatus(docker, network, undefined, undefined, async () => mountOptionsSupport(await lookup.state({ quiet: true })));
  const call = runtimeInfoRpcs({ status, verboseInfo: () => ({}) }).Status as UnaryHandler;
  return () => call({}, { method: "Status", signal: new AbortController().signal });
}

t.test("a registered launcher cridock wrote: mount_options true, beside the other features", async (t) => {
  const launcher = launcherFile(t);
  const response = await statusOf(async () => ({ cridock: { path: launcher } }))();
  t.same(response.features, { supplementalGroupsPolicy: true, userNamespacesHostNetwork: false, mountOptions: true });
  t.same(response.runtimeHandlers.map((h: { name: string }) => h.name), ["", "cridock"], "per-handler features are still listed");
});

t.test("no layer, another runtime under its name, or no answer: mount_options false", async (t) => {
  const launcher = launcherFile(t);
  const cases: [string, () => Promise<Record<string, { path: string }>>][] = [
    ["not registered", async () => ({ runc: { path: "runc" } })],
    ["a file cridock did not write", async () => ({ cridock: { path: join(launcher, "..", "other") } })],
    ["a path that is gone", async () => ({ cridock: { path: join(launcher, "..", "missing") } })],
    ["dockerd does not answer /info", async () => Promise.reject(new Error("connect ENOENT"))],
  ];
  for (const [what, runtimes] of cases) {
    const response = await statusOf(runtimes)().catch((err: unknown) => ({ error: err }));
    t.equal((response as { features?: { mountOptions?: boolean } }).features?.mountOptions, false, what);
  }
});

t.test("the answer stands a minute: Status every few seconds asks the layer's lookup (and dockerd) nothing more", async (t) => {
  let asked = 0;
  let layer = false;
  const probe = async () => {
    asked++;
    return layer ? { ok: true as const, layer: { runtime: "cridock", launcher: "/l", delegate: "runc", editsDir: "/e" } } : { ok: false as const, reason: "none" };
  };
  const status = new RuntimeStatus({} as DockerClient, {} as NetworkReadinessSource, undefined, undefined, probe);
  const t0 = 1_000_000;
  t.same(await Promise.all([status.runtimeFeatures(t0), status.runtimeFeatures(t0)]), [{ mountOptions: false }, { mountOptions: false }]);
  t.equal(asked, 1, "concurrent calls share one question");
  layer = true;
  t.same(await status.runtimeFeatures(t0 + 59_000), { mountOptions: false }, "still the answer of a minute ago");
  t.equal(asked, 1);
  t.same(await status.runtimeFeatures(t0 + 60_000), { mountOptions: true }, "a layer installed meanwhile is declared after it");
  t.equal(asked, 2);
});

t.test("RuntimeStatus without a mount options probe says no", async (t) => {
  const status = new RuntimeStatus({} as DockerClient, {} as NetworkReadinessSource);
  t.same(await status.runtimeFeatures(), { mountOptions: false });
  const failing = new RuntimeStatus({} as DockerClient, {} as NetworkReadinessSource, undefined, undefined, async () => Promise.reject(new Error("boom")));
  t.same(await failing.runtimeFeatures(), { mountOptions: false }, "an answer that cannot be had is no");
});
