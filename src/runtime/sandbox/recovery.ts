/**
 * Start-up reconciliation of sandbox checkpoints with Docker and the netns
 * handles, so a cridock killed at any point leaks nothing:
 *  - corrupt checkpoints are set aside (store's corrupt/), with a warning;
 *  - a RunPodSandbox that never finished (phase "creating") is undone: CNI
 *    DEL with the cached config, netns handle released, pause container and
 *    checkpoint removed, so the pod is cleanly gone and kubelet retries;
 *  - pause containers of this root that were created but never got a
 *    checkpoint (killed between create and the first write) are removed;
 *  - netns handles no checkpoint refers to are released;
 *  - after a reboot (bootedSince, store/boot.ts) every sandbox that was not
 *    stopped is stopped as StopPodSandbox would: its processes and its
 *    network namespace died with the old boot, but the CNI plugins' IP
 *    reservations are on disk and would stay held until kubelet stops it.
 * Checkpoints whose container is gone stay: they are listed NOTREADY until
 * kubelet stops (releasing the IP) and removes them.
 */
import { basename, join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { isNotFound } from "../../docker/errors.ts";
import { describeCause } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { listNetnsHandles, unpinNetns } from "../../network/netns.ts";
import { CorruptCheckpointError, type CheckpointStore } from "../../store/checkpoint.ts";
import { TYPE_LABEL, TYPE_SANDBOX } from "../labels.ts";
import { ROOT_LABEL } from "./docker.ts";
import type { SandboxRecord } from "./record.ts";
import type { SandboxManager } from "./manager.ts";

export interface RecoveryDeps {
  docker: DockerClient;
  store: CheckpointStore<SandboxRecord>;
  sandboxes: SandboxManager;
  rootDirectory: string;
  log: Logger;
  /** The machine rebooted since cridock last ran (store/boot.ts): nothing of a sandbox runs any more. */
  rebooted?: boolean;
}

export interface RecoveryReport {
  loaded: number;
  corrupt: number;
  undone: number;
  orphanContainers: number;
  orphanHandles: number;
  /** Sandboxes stopped because the machine rebooted under them. */
  stoppedAfterReboot: number;
}

export async function recoverSandboxes({ docker, store, sandboxes, rootDirectory, log: parent, rebooted = false }: RecoveryDeps): Promise<RecoveryReport> {
  const log = parent.child({ component: "recovery" });
  const report: RecoveryReport = { loaded: 0, corrupt: 0, undone: 0, orphanContainers: 0, orphanHandles: 0, stoppedAfterReboot: 0 };
  for (const key of await store.keys()) {
    try {
      const record = await store.read(key);
      if (record && record.id === key) {
        sandboxes.records.set(key, record);
        report.loaded++;
      }
    } catch (err) {
      if (!(err instanceof CorruptCheckpointError)) throw err;
      const aside = await store.setAside(key);
      log.warn({ path: err.path, setAside: aside, err: describeCause(err) }, "set aside a corrupt sandbox checkpoint (cridock no longer knows that sandbox)");
      report.corrupt++;
    }
  }

  for (const record of [...sandboxes.records.values()]) {
    if (record.phase !== "creating") continue;
    log.warn({ sandboxId: record.id, pod: `${record.spec.metadata.namespace}/${record.spec.metadata.name}` }, "undoing a RunPodSandbox interrupted by a restart");
    await sandboxes.withLock(record.id, () => sandboxes.undo(record));
    report.undone++;
  }

  if (rebooted) report.stoppedAfterReboot = await stopAfterReboot(sandboxes, log);

  let ours: Awaited<ReturnType<DockerClient["listContainers"]>> = [];
  try {
    ours = await docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_SANDBOX}`, `${ROOT_LABEL}=${rootDirectory}`] });
  } catch (err) {
    // dockerd down at start: serve anyway (Status reports it); orphans are retried at the next start.
    log.error({ err: describeCause(err) }, "cannot list pause containers; skipping orphan container cleanup");
  }
  for (const c of ours) {
    if (sandboxes.records.has(c.Id) || c.State !== "created") continue;
    log.warn({ containerId: c.Id, name: c.Names?.[0] }, "removing a pause container that was never checkpointed");
    try {
      await docker.removeContainer(c.Id, { force: true });
      report.orphanContainers++;
    } catch (err) {
      if (!isNotFound(err)) log.error({ containerId: c.Id, err: describeCause(err) }, "could not remove an orphan pause container");
    }
  }

  const referenced = new Set([...sandboxes.records.values()].map((r) => r.netnsPath).filter(Boolean));
  for (const handle of await listNetnsHandles(join(rootDirectory, "netns"))) {
    if (referenced.has(handle)) continue;
    log.warn({ handle, sandboxId: basename(handle) }, "releasing a netns handle no sandbox refers to");
    try {
      await unpinNetns(handle);
      report.orphanHandles++;
    } catch (err) {
      log.error({ handle, err: describeCause(err) }, "could not release an orphan netns handle");
    }
  }
  log.info(report, "sandbox recovery done");
  return report;
}

/**
 * StopPodSandbox for every sandbox not stopped: after a reboot none has a
 * process left, and its network namespace (so its veth and its handle's
 * mount) went with the kernel; CNI DEL runs with no namespace (the CNI
 * spec's DEL on a namespace that is gone), which releases what the plugins
 * keep on disk, host-local's IP reservation above all. A DEL that fails is
 * logged and left to kubelet's own StopPodSandbox, which retries it.
 */
async function stopAfterReboot(sandboxes: SandboxManager, log: Logger): Promise<number> {
  const stale = [...sandboxes.records.values()].filter((r) => r.phase !== "stopped" || r.network.phase === "attaching" || r.network.phase === "attached");
  if (stale.length === 0) return 0;
  log.info({ sandboxes: stale.length }, "the machine rebooted since cridock last ran: stopping the sandboxes that did not survive it");
  let stopped = 0;
  for (const record of stale) {
    try {
      await sandboxes.stop(record.id);
      stopped++;
    } catch (err) {
      log.warn({ sandboxId: record.id, err: describeCause(err) }, "could not stop a sandbox the reboot ended; kubelet's StopPodSandbox will retry");
    }
  }
  return stopped;
}
