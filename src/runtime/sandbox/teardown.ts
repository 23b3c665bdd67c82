/**
 * StopPodSandbox and RemovePodSandbox. CRI asks StopPodSandbox to forcibly
 * stop every process of the sandbox and reclaim its network: kubelet has
 * already stopped the containers gracefully when it mattered, and kubeadm
 * reset gives each call 2 s. So the workload containers are killed (no
 * grace period) all at once, then the pod network is torn down beside the
 * pause container's kill (CNI DEL works on the pinned netns handle, which
 * outlives the pause process).
 *
 * A CNI DEL that fails leaves the sandbox stoppable again (Stop fails with
 * the plugin's error and retries DEL next time), but never unremovable:
 * RemovePodSandbox runs every plugin's DEL it can, logs what it could not
 * release, and removes the sandbox, its netns handle and its checkpoint.
 */
import type { DockerClient } from "../../docker/client.ts";
import { isNotFound } from "../../docker/errors.ts";
import { CridockError, describeCause } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { PodNetwork } from "../../network/plugin.ts";
import { unpinNetns } from "../../network/netns.ts";
import type { StepTimer } from "../../steps.ts";
import { SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL } from "../labels.ts";
import { removedMeanwhile } from "../lookup.ts";
import { networkRequest } from "./network.ts";
import type { SandboxRecord } from "./record.ts";

export interface TeardownContext {
  docker: DockerClient;
  network: PodNetwork;
  log: Logger;
  /** Persists the record (checkpoint and memory). */
  saveRecord(record: SandboxRecord, timer?: StepTimer): Promise<void>;
  dropRecord(id: string, timer?: StepTimer): Promise<void>;
  /** Keeps the in-memory record in step without a checkpoint write. */
  setRecord(record: SandboxRecord): void;
  /** Called for each workload container RemovePodSandbox removed. */
  containerRemoved?: (containerId: string) => Promise<void>;
}

/** Container states in which a container has processes to kill. */
const LIVE_STATES = new Set(["running", "paused", "restarting"]);

/** Stops the sandbox `id` (its record, if it has one); the caller holds the sandbox's lock. */
export async function stopSandbox(ctx: TeardownContext, id: string, record: SandboxRecord | undefined, timer: StepTimer): Promise<void> {
  await forEachContainer(ctx, id, "kill", (c) => killContainer(ctx.docker, c), timer, (state) => LIVE_STATES.has(state));
  // Without a pinned handle, DEL uses the pause process's namespace path cached at ADD: keep the pause alive until DEL is done.
  const pinned = Boolean(record?.netnsPath);
  const killPause = () => timer.time("docker.kill", () => killContainer(ctx.docker, id));
  const [network, pause] = pinned
    ? await Promise.allSettled([detachNetwork(ctx, record!, "strict", timer), killPause()])
    : await settleInOrder(() => (record ? detachNetwork(ctx, record, "strict", timer) : Promise.resolve(undefined)), killPause);
  if (network.status === "rejected") throw network.reason;
  const detached = network.value;
  if (pause.status === "rejected" && !isNotFound(pause.reason)) {
    throw new CridockError(codeOf(pause.reason), `StopPodSandbox ${id}: stopping the pause container`, { cause: pause.reason });
  }
  // One write for both changes. Should cridock die before it, the next Stop runs DEL again, which is a
  // no-op then: the CNI cache entry is gone once DEL succeeded.
  if (detached && record && (detached !== record || record.phase !== "stopped")) await ctx.saveRecord({ ...detached, phase: "stopped" }, timer);
}

/** Removes the sandbox `id` and everything of it; the caller holds the sandbox's lock. */
export async function removeSandbox(ctx: TeardownContext, id: string, record: SandboxRecord | undefined, timer: StepTimer): Promise<void> {
  await forEachContainer(
    ctx,
    id,
    "remove",
    async (c) => {
      await ctx.docker.removeContainer(c, { force: true, volumes: true }).catch(async (err) => {
        if (!isNotFound(err) && !(await removedMeanwhile(ctx.docker, c))) throw err;
      });
      await ctx.containerRemoved?.(c);
    },
    timer,
  );
  if (record) await detachNetwork(ctx, record, "force", timer);
  // The network is detached (or given up on): the netns handle is released alongside the removal.
  const [removed, unpinned] = await Promise.allSettled([
    timer.time("docker.remove", () => ctx.docker.removeContainer(id, { force: true, volumes: true })),
    record?.netnsPath ? timer.time("netns.unpin", () => unpinNetns(record.netnsPath), 1) : undefined,
  ]);
  // Another removal (dockerd's "already in progress") that finished counts.
  if (removed.status === "rejected" && !isNotFound(removed.reason) && !(await removedMeanwhile(ctx.docker, id))) {
    throw new CridockError(codeOf(removed.reason), `RemovePodSandbox ${id}: removing the pause container`, { cause: removed.reason });
  }
  if (unpinned.status === "rejected") throw unpinned.reason;
  if (record) await ctx.dropRecord(id, timer);
}

/**
 * CNI DEL once: returns the record with the detached phase, which the
 * caller persists so later calls skip it (the record itself when there was
 * nothing to detach). "strict" fails when a plugin's DEL fails (the next
 * Stop tries again); "force" (RemovePodSandbox) logs what could not be
 * released and counts the network as detached.
 */
async function detachNetwork(ctx: TeardownContext, record: SandboxRecord, mode: "strict" | "force", timer: StepTimer): Promise<SandboxRecord> {
  if (record.network.phase !== "attaching" && record.network.phase !== "attached") return record;
  if (record.networkKind === "cni") {
    try {
      const left = await ctx.network.tearDown({ ...networkRequest(record), timer }, { force: mode === "force" });
      if (left.length > 0) {
        ctx.log.error(
          { sandboxId: record.id, network: record.network.name, ips: record.network.ips, failures: left },
          "RemovePodSandbox: CNI DEL failed; the sandbox is removed anyway, and what these plugins set up for it may remain",
        );
      }
    } catch (err) {
      throw new CridockError(
        codeOf(err),
        `pod sandbox ${record.id}: tearing down the pod network failed (its containers are stopped; StopPodSandbox retries DEL, RemovePodSandbox removes the sandbox anyway)`,
        { cause: err },
      );
    }
  }
  const updated: SandboxRecord = { ...record, network: { ...record.network, phase: "detached" } };
  // Remove persists the detached phase only by dropping the record: keep memory in step meanwhile.
  ctx.setRecord(updated);
  return updated;
}

/**
 * Kills a container at once and returns when it has stopped: Docker's stop
 * with no grace period (its stop signal, then SIGKILL without waiting; it
 * copes with paused and already stopped containers). A caller's deadline
 * does not cancel it: a kill under way is worth finishing.
 */
async function killContainer(docker: DockerClient, id: string): Promise<void> {
  await docker.stopContainer(id, 0);
}

async function forEachContainer(
  ctx: TeardownContext,
  sandboxId: string,
  what: string,
  fn: (id: string) => Promise<unknown>,
  timer: StepTimer,
  wanted: (state: string) => boolean = () => true,
): Promise<void> {
  const containers = await timer.time("docker.list", () =>
    ctx.docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_CONTAINER}`, `${SANDBOX_ID_LABEL}=${sandboxId}`] }),
  );
  const targets = containers.filter((c) => wanted(c.State));
  if (targets.length === 0) return;
  const results = await timer.time(`containers.${what}`, () => Promise.allSettled(targets.map((c) => fn(c.Id))));
  const failed = results.flatMap((r, i) => (r.status === "rejected" && !isNotFound(r.reason) ? [`${targets[i]!.Id.slice(0, 12)}: ${describeCause(r.reason)}`] : []));
  if (failed.length) throw new CridockError("UNKNOWN", `pod sandbox ${sandboxId}: could not ${what} its containers: ${failed.join("; ")}`);
}

/** Runs `first` then `second` whatever `first` did, settling both as Promise.allSettled would. */
async function settleInOrder<A, B>(first: () => Promise<A>, second: () => Promise<B>): Promise<[PromiseSettledResult<A>, PromiseSettledResult<B>]> {
  const a = await first().then(
    (value): PromiseSettledResult<A> => ({ status: "fulfilled", value }),
    (reason): PromiseSettledResult<A> => ({ status: "rejected", reason }),
  );
  const [b] = await Promise.allSettled([second()]);
  return [a, b];
}

function codeOf(err: unknown): CridockError["code"] {
  return err instanceof CridockError ? err.code : "UNKNOWN";
}
