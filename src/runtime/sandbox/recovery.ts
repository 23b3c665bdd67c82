/**
 * Start-up reconciliation of sandbox checkpoints with Docker and the netns
 * handles, so a cridock killed at any point leaks nothing:
 *  - corrupt checkpoints are dropped;
 *  - a RunPodSandbox that never finished (phase "creating") is undone: CNI
 *    DEL with the cached config, netns handle released, pause container and
 *    checkpoint removed, so the pod is cleanly gone and kubelet retries;
 *  - pause containers of this root that were created but never got a
 *    checkpoint (killed between create and the first write) are removed;
 *  - netns handles no checkpoint refers to are released.
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
}

export interface RecoveryReport {
  loaded: number;
  corrupt: number;
  undone: number;
  orphanContainers: number;
  orphanHandles: number;
}

export async function recoverSandboxes({ docker, store, sandboxes, rootDirectory, log: parent }: RecoveryDeps): Promise<RecoveryReport> {
  const log = parent.child({ component: "recovery" });
  const report: RecoveryReport = { loaded: 0, corrupt: 0, undone: 0, orphanContainers: 0, orphanHandles: 0 };
  for (const key of await store.keys()) {
    try {
      const record = await store.read(key);
      if (record && record.id === key) {
        sandboxes.records.set(key, record);
        report.loaded++;
      }
    } catch (err) {
      if (!(err instanceof CorruptCheckpointError)) throw err;
      log.warn({ path: err.path, err: describeCause(err) }, "dropping a corrupt sandbox checkpoint");
      await store.remove(key);
      report.corrupt++;
    }
  }

  for (const record of [...sandboxes.records.values()]) {
    if (record.phase !== "creating") continue;
    log.warn({ sandboxId: record.id, pod: `${record.spec.metadata.namespace}/${record.spec.metadata.name}` }, "undoing a RunPodSandbox interrupted by a restart");
    await sandboxes.withLock(record.id, () => sandboxes.undo(record));
    report.undone++;
  }

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
