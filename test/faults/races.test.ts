/**
 * Races: duplicate and racing RunPodSandbox for one pod attempt, and
 * Create/Start/Remove of containers while other clients list, inspect and
 * stop the same pods. No call may fail with UNKNOWN or INTERNAL, no list may
 * show a sandbox or container twice, and nothing may be left afterwards.
 */
import t from "tap";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";
import { FAULT_LABEL, leakCount, leaks, podConfig, removeAllPods, startFaultEnv } from "./env.ts";

const ALREADY_EXISTS = 6;
const UNKNOWN = 2;
const INTERNAL = 13;

const env = await startFaultEnv();
t.teardown(() => env.close());
await env.cridock.client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });

function codeOf(err: unknown): number {
  return (err as { code?: number }).code ?? -1;
}

t.test("racing RunPodSandbox for one attempt: exactly one sandbox, the rest ALREADY_EXISTS naming it", async (t) => {
  let duplicates = 0;
  for (let round = 0; round < 5; round++) {
    const config = podConfig(env, `dup-${process.pid}-${round}`);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => env.cridock.client.call("RunPodSandbox", { config })));
    const ids = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.podSandboxId as string] : []));
    const errors = results.flatMap((r) => (r.status === "rejected" ? [r.reason as { code: number; details: string }] : []));
    t.equal(ids.length, 1, `round ${round}: one call succeeds`);
    t.ok(errors.every((e) => e.code === ALREADY_EXISTS && e.details.includes(ids[0]!)), `round ${round}: the others are ALREADY_EXISTS naming it`);
    // Sequential duplicates too.
    const again = await env.cridock.client.call("RunPodSandbox", { config }).catch((e) => e);
    t.equal(codeOf(again), ALREADY_EXISTS, `round ${round}: a later duplicate is ALREADY_EXISTS`);
    const { items } = await env.cridock.client.call("ListPodSandbox", { filter: { labelSelector: { [FAULT_LABEL]: "1" } } });
    const mine = (items as { metadata: { name: string }; state: number }[]).filter((s) => s.metadata.name === (config.metadata as { name: string }).name);
    duplicates += mine.length - 1;
    t.same(mine.map((s) => s.state), [0], `round ${round}: one READY sandbox listed`);
  }
  t.comment(`duplicate sandboxes: ${duplicates}`);
  await removeAllPods(env);
  t.equal(leakCount(await leaks(env)), 0, "nothing leaked");
});

t.test("Create/Start/Remove against concurrent lists, statuses and stops", async (t) => {
  const client = env.cridock.client;
  const pods = await Promise.all(
    [0, 1, 2].map(async (i) => {
      const config = podConfig(env, `churn-${process.pid}-${i}`);
      return { config, id: (await client.call("RunPodSandbox", { config })).podSandboxId as string };
    }),
  );
  const bad: string[] = [];
  const note = (what: string) => (err: unknown) => {
    const code = codeOf(err);
    if (code === UNKNOWN || code === INTERNAL || code < 0) bad.push(`${what}: ${code} ${(err as Error).message}`);
  };
  let running = true;
  let listsChecked = 0;
  let listDuplicates = 0;
  const observers = [
    (async () => {
      while (running) {
        const [{ containers }, { items }] = await Promise.all([client.call("ListContainers", {}), client.call("ListPodSandbox", {})]).catch((e) => {
          note("list")(e);
          return [{ containers: [] }, { items: [] }];
        });
        const ids = [...(containers as { id: string }[]).map((c) => c.id), ...(items as { id: string }[]).map((s) => s.id)];
        listDuplicates += ids.length - new Set(ids).size;
        listsChecked++;
        for (const c of (containers as { id: string }[]).slice(0, 3)) await client.call("ContainerStatus", { containerId: c.id }).catch(note("status"));
      }
    })(),
    (async () => {
      while (running) {
        const { containers } = await client.call("ListContainers", {}).catch(() => ({ containers: [] }));
        const victim = (containers as { id: string }[])[Math.floor(Math.random() * containers.length)];
        if (victim) await client.call("StopContainer", { containerId: victim.id, timeout: 0n }).catch(note("stop"));
        await new Promise((r) => setTimeout(r, 20));
      }
    })(),
  ];
  const workers = pods.map(async (pod, w) => {
    for (let i = 0; i < 8; i++) {
      const config = { metadata: { name: `c${i}`, attempt: 0 }, image: { image: BUSYBOX_IMAGE }, command: ["sleep", "600"], logPath: `c${i}.log`, labels: { [FAULT_LABEL]: "1" } };
      let id = "";
      try {
        id = (await client.call("CreateContainer", { podSandboxId: pod.id, config, sandboxConfig: pod.config })).containerId;
        await client.call("StartContainer", { containerId: id }).catch((e) => {
          // A racing StopContainer may stop it first; FAILED_PRECONDITION is the honest answer then.
          if (codeOf(e) !== 9) throw e;
        });
        if (i % 2 === w % 2) await client.call("RemoveContainer", { containerId: id });
      } catch (err) {
        note(`worker ${w} container ${i}`)(err);
      }
    }
    // One pod is stopped while its containers are still being worked on by the observers.
    if (w === 0) await client.call("StopPodSandbox", { podSandboxId: pod.id }).catch(note("stop pod"));
  });
  await Promise.all(workers);
  running = false;
  await Promise.all(observers);
  t.same(bad, [], "no UNKNOWN or INTERNAL answers");
  t.equal(listDuplicates, 0, `no list showed an id twice (${listsChecked} lists)`);
  await removeAllPods(env);
  t.equal(leakCount(await leaks(env)), 0, "nothing leaked");
});
