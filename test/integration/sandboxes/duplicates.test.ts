// One sandbox per pod attempt and one container per (sandbox, name,
// attempt): repeated and racing creates are ALREADY_EXISTS naming the
// holder, never a second READY sandbox, never a destroyed pause container,
// never a record left behind; a removed container takes its log writer's
// state with it, also when RemovePodSandbox removes it.
import t from "tap";
import { access } from "node:fs/promises";
import { join } from "node:path";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { assertNoLeaks, podConfig, removePod, startSandboxEnv } from "./helpers.ts";

const ALREADY_EXISTS = 6;

interface Listed {
  id: string;
  state: number;
  createdAt: bigint;
  metadata: { name: string };
}

async function listed(env: Awaited<ReturnType<typeof startSandboxEnv>>, name: string): Promise<Listed[]> {
  const { items } = await env.cridock.client.call("ListPodSandbox", {});
  return (items as Listed[]).filter((s) => s.metadata.name === name);
}

t.test("RunPodSandbox twice for one attempt: ALREADY_EXISTS naming the sandbox; free again once removed", async (t) => {
  const env = await startSandboxEnv(t);
  const config = podConfig("twice");
  const { podSandboxId: first } = await env.cridock.client.call("RunPodSandbox", { config });
  const err = await env.cridock.client.call("RunPodSandbox", { config }).catch((e) => e);
  t.equal(err.code, ALREADY_EXISTS, "the second call is ALREADY_EXISTS");
  t.match(err.details, first, "and names the existing sandbox");
  t.equal((await listed(env, "twice")).length, 1, "one sandbox is listed");
  await removePod(env, first);
  const { podSandboxId: again } = await env.cridock.client.call("RunPodSandbox", { config });
  t.not(again, first, "after removal the attempt can run again");
  await removePod(env, again);
  await assertNoLeaks(t, env);
});

t.test("four racing RunPodSandbox for one attempt: one sandbox, the rest ALREADY_EXISTS, nothing left behind", async (t) => {
  const env = await startSandboxEnv(t);
  for (let round = 0; round < 3; round++) {
    const config = podConfig(`race-${round}`);
    const results = await Promise.allSettled([0, 1, 2, 3].map(() => env.cridock.client.call("RunPodSandbox", { config })));
    const ok = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.podSandboxId as string] : []));
    const codes = results.flatMap((r) => (r.status === "rejected" ? [(r.reason as { code: number }).code] : []));
    t.equal(ok.length, 1, `round ${round}: exactly one call succeeds`);
    t.same(codes, [ALREADY_EXISTS, ALREADY_EXISTS, ALREADY_EXISTS], `round ${round}: the others are ALREADY_EXISTS`);
    const sandboxes = await listed(env, `race-${round}`);
    t.same(sandboxes.map((s) => [s.id, s.state]), [[ok[0], 0]], "one READY sandbox, no NOTREADY leftovers");
    t.ok(sandboxes.every((s) => BigInt(s.createdAt) > 0n), "every listed sandbox has a created_at");
    await removePod(env, ok[0]!);
  }
  await assertNoLeaks(t, env);
});

t.test("CreateContainer twice for one attempt: ALREADY_EXISTS; RemovePodSandbox removes the log state of its containers", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const config = { ...podConfig("ctr-twice"), logDirectory: join(env.scratch, "pod-logs") };
  const { podSandboxId } = await client.call("RunPodSandbox", { config });
  const container = { metadata: { name: "app", attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sh", "-c", "echo hi; sleep 60"], logPath: "app.log", labels: { "cridock.test": "sandboxes" } };
  const create = () => client.call("CreateContainer", { podSandboxId, config: container, sandboxConfig: config });
  const racing = await Promise.allSettled([create(), create(), create()]);
  const created = racing.flatMap((r) => (r.status === "fulfilled" ? [r.value.containerId as string] : []));
  t.equal(created.length, 1, "one of three racing creates succeeds");
  const id = created[0]!;
  const err = await create().catch((e) => e);
  t.equal(err.code, ALREADY_EXISTS, "a later create is ALREADY_EXISTS");
  t.match(err.details, id, "naming the container");
  await client.call("StartContainer", { containerId: id });
  const state = join(env.cridock.rootDirectory, "logs", `${id}.json`);
  await access(state);
  t.pass("the log writer keeps its state while the container exists");
  await removePod(env, podSandboxId);
  await t.rejects(access(state), "RemovePodSandbox removed the log writer's state with the container");
  await assertNoLeaks(t, env);
});
