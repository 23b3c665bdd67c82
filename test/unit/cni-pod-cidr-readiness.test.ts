/**
 * A CNI config whose plugins take ipRanges gets its pod range from kubelet
 * (UpdateRuntimeConfig): until a CIDR is known the network is not ready, so
 * kubelet keeps the node NotReady rather than have every pod's ADD fail
 * with "no IP ranges specified"; a config without ipRanges is ready at once.
 */
import t, { type Test } from "tap";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CniNetwork } from "../../src/network/cni.ts";
import { createLogger } from "../../src/log.ts";

const log = createLogger("silent" as never);

async function network(t: Test, bridgeCapabilities: Record<string, boolean> | undefined, podCidr?: string): Promise<CniNetwork> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-cidr-ready-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const [bin, conf] = [join(dir, "bin"), join(dir, "conf")];
  await Promise.all([mkdir(bin), mkdir(conf)]);
  for (const name of ["bridge", "loopback"]) {
    await writeFile(join(bin, name), "#!/bin/sh\n");
    await chmod(join(bin, name), 0o755);
  }
  const bridge = { type: "bridge", ...(bridgeCapabilities ? { capabilities: bridgeCapabilities } : {}), ipam: { type: "host-local" } };
  await writeFile(join(conf, "10-net.conflist"), JSON.stringify({ cniVersion: "1.0.0", name: "net", plugins: [bridge] }));
  const cni = new CniNetwork({ confDir: conf, binDirs: [bin], cacheDir: join(dir, "cache"), log, podCidr });
  await cni.reload();
  return cni;
}

t.test("ipRanges: not ready until kubelet's pod CIDR arrives", async (t) => {
  const cni = await network(t, { ipRanges: true });
  const waiting = cni.readiness();
  t.equal(waiting.ready, false);
  t.match(waiting, { reason: "NetworkPluginNotReady", message: /takes the pod CIDR \(ipRanges\) and kubelet has not sent one yet/ });
  cni.setPodCidr("10.113.0.0/24");
  t.same(cni.readiness(), { ready: true });
});

t.test("ipRanges with --pod-cidr: ready from the start", async (t) => {
  t.same((await network(t, { ipRanges: true }, "10.113.0.0/24")).readiness(), { ready: true });
});

t.test("no ipRanges: ready without a pod CIDR", async (t) => {
  t.same((await network(t, undefined)).readiness(), { ready: true });
  t.same((await network(t, { ipRanges: false })).readiness(), { ready: true });
});
