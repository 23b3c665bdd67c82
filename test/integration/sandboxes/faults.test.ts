// Faults: a failing CNI plugin, a pause container killed from outside,
// cridock killed -9 in the middle of RunPodSandbox, and hostile input. After
// each: nothing leaked and the server still serves.
import t from "tap";
import { rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { allocatedIps, assertNoLeaks, docker, podConfig, removePod, runPod, sandboxCniConf, scriptPlugin, startSandboxEnv } from "./helpers.ts";

const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const NOTREADY = 1;

t.test("a failing plugin fails RunPodSandbox with its message and leaves nothing", async (t) => {
  const bin = await scriptPlugin(
    t,
    "failing",
    `cat >/dev/null
if [ "$CNI_COMMAND" = ADD ]; then echo '{"cniVersion":"1.0.0","code":100,"msg":"injected failure from the test plugin"}'; echo 'plugin stderr line' >&2; exit 1; fi
exit 0`,
  );
  const env = await startSandboxEnv(t, { extraBinDir: bin, cni: await sandboxCniConf([{ type: "failing" }]) });
  await t.rejects(env.cridock.client.call("RunPodSandbox", { config: podConfig("failing") }), {
    message: /setting up the pod network.*injected failure from the test plugin.*plugin stderr line/s,
  });
  const { items } = await env.cridock.client.call("ListPodSandbox", {});
  t.notOk(items.some((s: { metadata: { name: string } }) => s.metadata.name === "failing"), "the failed sandbox is not listed");
  await assertNoLeaks(t, env);
});

t.test("pause killed from outside: NOTREADY, and StopPodSandbox still releases the IP", async (t) => {
  const env = await startSandboxEnv(t);
  const { id, ip } = await runPod(env, podConfig("killed"));
  t.same(await allocatedIps(env.cni), [ip]);
  docker("kill", id);
  const { status } = await env.cridock.client.call("PodSandboxStatus", { podSandboxId: id });
  t.equal(status.state, NOTREADY, "a dead pause container is NOTREADY");
  await env.cridock.client.call("StopPodSandbox", { podSandboxId: id });
  t.same(await allocatedIps(env.cni), [], "the IP is released by StopPodSandbox");
  await env.cridock.client.call("RemovePodSandbox", { podSandboxId: id });
  await assertNoLeaks(t, env);
});

t.test("cridock killed -9 during RunPodSandbox: after a restart nothing is leaked", async (t) => {
  // A plugin that signals it started, then stalls, so the kill lands inside CNI ADD.
  const marker = join(tmpdir(), `cridock-slow-${process.pid}`);
  const bin = await scriptPlugin(
    t,
    "slow",
    `conf=$(cat)
if [ "$CNI_COMMAND" = ADD ]; then touch ${marker}; sleep 20; fi
printf '%s' "$conf" | sed -n 's/.*"prevResult":\\(.*\\)}$/\\1/p'
exit 0`,
  );
  t.teardown(() => rm(marker, { force: true }));
  const env = await startSandboxEnv(t, { extraBinDir: bin, cni: await sandboxCniConf([{ type: "slow" }]) });
  const pending = env.cridock.client.call("RunPodSandbox", { config: podConfig("crash") }).catch((err) => err);
  for (let i = 0; i < 150; i++) {
    if (await stat(marker).then(() => true, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(await stat(marker).then(() => true, () => false), "the kill lands while CNI ADD runs");
  t.equal((await allocatedIps(env.cni)).length, 1, "bridge had already taken an IP");
  await env.cridock.kill();
  t.ok((await pending) instanceof Error, "the interrupted RunPodSandbox failed");

  await env.restart();
  const { items } = await env.cridock.client.call("ListPodSandbox", {});
  t.notOk(items.some((s: { metadata: { name: string } }) => s.metadata.name === "crash"), "the half-made pod is cleanly gone");
  await assertNoLeaks(t, env);
});

t.test("hostile input is refused and the server stays up", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  await t.rejects(client.call("RunPodSandbox", { config: { hostname: "x" } }), { code: INVALID_ARGUMENT, message: /metadata/ });
  await t.rejects(client.call("RunPodSandbox", {}), { code: INVALID_ARGUMENT });
  await t.rejects(client.call("RunPodSandbox", { config: podConfig("bad_name") }), { code: INVALID_ARGUMENT, message: /metadata.name/ });
  await t.rejects(client.call("RunPodSandbox", { config: podConfig("x".repeat(5000)) }), { code: INVALID_ARGUMENT });
  await t.rejects(client.call("RunPodSandbox", { config: podConfig("../../etc") }), { code: INVALID_ARGUMENT });
  await t.rejects(client.call("RunPodSandbox", { config: podConfig("handler"), runtimeHandler: "no-such-runtime" }), {
    code: INVALID_ARGUMENT,
    message: /runtime handler "no-such-runtime" is not a Docker runtime/,
  });
  await t.rejects(client.call("PodSandboxStatus", { podSandboxId: "deadbeef" }), { code: NOT_FOUND });
  await t.rejects(client.call("PodSandboxStatus", { podSandboxId: "not hex!" }), { code: INVALID_ARGUMENT });
  await t.rejects(client.call("PodSandboxStatus", { podSandboxId: "" }), { code: INVALID_ARGUMENT });
  await client.call("StopPodSandbox", { podSandboxId: "deadbeef".repeat(8) });
  await client.call("RemovePodSandbox", { podSandboxId: "deadbeef".repeat(8) });
  t.equal((await client.call("Version", {})).version, "0.1.0", "still serving");
  const pod = await runPod(env, podConfig("after-bad-input"));
  t.ok(pod.ip, "and still runs pods");
  await removePod(env, pod.id);
  await assertNoLeaks(t, env);
});
