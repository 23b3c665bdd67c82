// The pod range from kubelet: a CNI config that names no range of its own
// (the bridge plugin takes ipRanges, as a cluster's node CIDR comes), the
// CIDR sent once by UpdateRuntimeConfig, and cridock restarted: kubelet does
// not send an unchanged CIDR again, so cridock must still have it.
import t from "tap";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { assertNoLeaks, podConfig, removePod, runPod, SANDBOX_TEST_NETWORK, SANDBOX_TEST_SUBNET, sandboxCniConf, startSandboxEnv } from "./helpers.ts";

/** The test bridge's own subnet (its gateway address is already set); the config names no range, so only this one can give an IP. */
const NODE_CIDR = SANDBOX_TEST_SUBNET;

t.test("UpdateRuntimeConfig's pod CIDR gives pods their IPs, before and after a cridock restart", async (t) => {
  const cni = await sandboxCniConf();
  const file = join(cni.dir, `10-${SANDBOX_TEST_NETWORK}.conflist`);
  const list = JSON.parse(await readFile(file, "utf8")) as { plugins: Record<string, any>[] };
  const bridge = list.plugins.find((p) => p.type === "bridge")!;
  bridge.capabilities = { ...bridge.capabilities, ipRanges: true };
  delete bridge.ipam.ranges;
  await writeFile(file, JSON.stringify(list, null, 2) + "\n");
  const env = await startSandboxEnv(t, { cni });

  // Before kubelet sent a CIDR there is no range: the network is not ready (and no ADD runs without a range).
  const { status } = await env.cridock.client.call("Status", {});
  t.match(status.conditions.find((c: { type: string }) => c.type === "NetworkReady"), { status: false, reason: "NetworkPluginNotReady", message: /kubelet has not sent one yet/ });
  await t.rejects(env.cridock.client.call("RunPodSandbox", { config: podConfig("cidr-none") }), { code: 9, message: /pod network is not ready/ });
  await assertNoLeaks(t, env);

  await env.cridock.client.call("UpdateRuntimeConfig", { runtimeConfig: { networkConfig: { podCidr: NODE_CIDR } } });
  const before = await runPod(env, podConfig("cidr-before"));
  t.match(before.ip, /^10\.91\.0\.\d+$/, `the pod IP (${before.ip}) is in ${NODE_CIDR}`);
  await removePod(env, before.id);

  await env.cridock.stop();
  await env.restart();
  const after = await runPod(env, podConfig("cidr-after"));
  t.match(after.ip, /^10\.91\.0\.\d+$/, `after a restart, with no new UpdateRuntimeConfig, the pod IP (${after.ip}) is still in ${NODE_CIDR}`);
  await removePod(env, after.id);
  await assertNoLeaks(t, env);
});
