// Tearing a pod's network down when CNI DEL cannot simply succeed: a plugin
// whose DEL always fails (StopPodSandbox fails naming it, RemovePodSandbox
// still gets rid of the pod and releases what the other plugins hold), a
// network namespace that is already gone (DEL runs with an empty CNI_NETNS,
// as the CNI spec has runtimes do), and a plugin no longer installed (its
// DEL is skipped). Real bridge, host-local and firewall plugins throughout.
import t from "tap";
import { readFile, rm } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { allocatedIps, assertNoLeaks, docker, PASS_THROUGH, podConfig, runPod, sandboxCniConf, scriptPlugin, startSandboxEnv } from "./helpers.ts";

const NOTREADY = 1;

t.test("a plugin whose DEL always fails: StopPodSandbox fails naming it, RemovePodSandbox removes the pod and releases its IP and netns", async (t) => {
  const bin = await scriptPlugin(
    t,
    "faildel",
    `conf=$(cat)
if [ "$CNI_COMMAND" = DEL ]; then echo '{"cniVersion":"1.0.0","code":11,"msg":"injected DEL failure"}'; exit 1; fi
printf '%s' "$conf" | sed -n 's/.*"prevResult":\\(.*\\)}$/\\1/p'`,
  );
  const env = await startSandboxEnv(t, { extraBinDir: bin, cni: await sandboxCniConf([{ type: "faildel" }]) });
  const client = env.cridock.client;
  const { id, ip } = await runPod(env, podConfig("faildel"));
  t.same(await allocatedIps(env.cni), [ip]);

  for (let attempt = 1; attempt <= 2; attempt++) {
    await t.rejects(client.call("StopPodSandbox", { podSandboxId: id }), { message: /tearing down the pod network.*faildel DEL.*injected DEL failure/s }, `Stop ${attempt} fails naming the plugin`);
  }
  t.equal(docker("inspect", "-f", "{{.State.Running}}", id), "false", "the pause container is stopped all the same");
  t.equal((await client.call("PodSandboxStatus", { podSandboxId: id })).status.state, NOTREADY);

  await client.call("RemovePodSandbox", { podSandboxId: id });
  await t.rejects(client.call("PodSandboxStatus", { podSandboxId: id }), { code: 5 }, "the sandbox is gone");
  const logged = env.cridock.logs().split("\n").find((l) => l.includes("CNI DEL failed; the sandbox is removed anyway"));
  t.match(logged, /"failures":\[[^\]]*injected DEL failure/, "what may remain is logged, with the plugin's error");
  // The bridge and firewall plugins' DEL ran past the failing one: the IP, veth, rules, netns mount and cache entry are all gone.
  await assertNoLeaks(t, env);
});

t.test("a network namespace already gone: DEL runs without CNI_NETNS and StopPodSandbox succeeds", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  const { id, ip } = await runPod(env, podConfig("netns-gone"));
  t.same(await allocatedIps(env.cni), [ip]);
  const handle = join(env.cridock.rootDirectory, "netns", id);
  // What a reboot (or someone's cleanup) leaves: the pause process gone, the handle file no longer a mount.
  docker("kill", id);
  execFileSync("umount", [handle]);
  t.notOk((await readFile("/proc/self/mountinfo", "utf8")).includes(handle), "the handle is no longer mounted");

  await client.call("StopPodSandbox", { podSandboxId: id });
  t.same(await allocatedIps(env.cni), [], "the IP is released");
  await client.call("RemovePodSandbox", { podSandboxId: id });
  await assertNoLeaks(t, env);
});

t.test("a plugin no longer installed: its DEL is skipped, the others run, StopPodSandbox succeeds", async (t) => {
  const bin = await scriptPlugin(t, "vanishing", PASS_THROUGH);
  const env = await startSandboxEnv(t, { extraBinDir: bin, cni: await sandboxCniConf([{ type: "vanishing" }]) });
  const client = env.cridock.client;
  const { id, ip } = await runPod(env, podConfig("vanishing"));
  t.same(await allocatedIps(env.cni), [ip]);
  await rm(join(bin, "vanishing"));

  await client.call("StopPodSandbox", { podSandboxId: id });
  t.same(await allocatedIps(env.cni), [], "the IP is released by the plugins still there");
  t.match(env.cridock.logs(), /CNI plugin no longer installed: its DEL is skipped/);
  await client.call("RemovePodSandbox", { podSandboxId: id });
  await assertNoLeaks(t, env);
});

t.test("a failed RunPodSandbox whose undoing DEL fails as its ADD did leaves no netns handle, checkpoint or IP", async (t) => {
  const bin = await scriptPlugin(
    t,
    "failboth",
    `cat >/dev/null
echo '{"cniVersion":"1.0.0","code":11,"msg":"injected failure of every command"}'; exit 1`,
  );
  const env = await startSandboxEnv(t, { extraBinDir: bin, cni: await sandboxCniConf([{ type: "failboth" }]) });
  await t.rejects(env.cridock.client.call("RunPodSandbox", { config: podConfig("failboth") }), { message: /setting up the pod network.*injected failure of every command/s });
  const logged = env.cridock.logs().split("\n").find((l) => l.includes("undo: CNI DEL failed"));
  t.match(logged, /"failures":\[[^\]]*injected failure of every command/, "the DEL failure is logged");
  await assertNoLeaks(t, env);
});
