/**
 * A start's reconciliation with Docker of what the last run left, before
 * pods are served: scratch containers of an interrupted create, sandboxes
 * and their networks (recovery, told whether the machine rebooted since),
 * the log writers of containers that ran on while cridock was down, and the
 * pods cri-dockerd left running. Each step runs through `step`, which the
 * caller uses to time it and to name it while the CRI socket waits
 * (cri/startup-gate.ts).
 */
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import type { PodNetwork } from "../network/plugin.ts";
import { bootedSince, BootStore, currentBootId } from "../store/boot.ts";
import type { RuntimeDomain } from "./domain.ts";
import { adoptCriDockerdSandboxes } from "./sandbox/adopt.ts";
import { recoverSandboxes } from "./sandbox/recovery.ts";

/** Runs one named step of the reconciliation. */
export type ReconcileStep = <T>(name: string, fn: () => Promise<T>) => Promise<T>;

/** The flags the reconciliation reads. */
export interface ReconcileSettings {
  rootDirectory: string;
  criDockerdRootDirectory: string;
}

/**
 * Starts the reconciliation; the promise settles when it is through, and
 * rejects when recovery or the adoption failed (which ends the process as a
 * failed start does). Its first step is "scratch.sweep".
 */
export function reconcileAtStart(
  { imageFiles, sandboxStore, sandboxes, containers, logFollowers }: RuntimeDomain,
  docker: DockerClient,
  network: PodNetwork,
  settings: ReconcileSettings,
  log: Logger,
  step: ReconcileStep,
): Promise<void> {
  const reconciled = (async () => {
    // Scratch containers (image-files.ts) live for one create call; a crash may have left one.
    await step("scratch.sweep", () => imageFiles.removeLeftovers())
      .then((n) => n > 0 && log.info({ removed: n }, "removed scratch containers left by an earlier run"))
      .catch((err) => log.warn({ err }, "could not remove leftover scratch containers"));
    const boots = new BootStore(settings.rootDirectory);
    const [recordedBootId, bootId] = await Promise.all([boots.load(), currentBootId()]);
    const rebooted = bootedSince(recordedBootId, bootId);
    await step("recovery", () => recoverSandboxes({ docker, store: sandboxStore, sandboxes, rootDirectory: settings.rootDirectory, log, rebooted }));
    // Only once recovery is through: a start that fails before this stops the old boot's sandboxes again.
    // Written when the boot changed only: the same boot's restarts need no fsynced write.
    if (bootId && bootId !== recordedBootId) await boots.save(bootId).catch((err) => log.warn({ err }, "could not record this boot's id; the next start cannot tell whether the machine rebooted"));
    // Log writers of containers that ran on while cridock was down pick up where they stopped.
    await step("logs.resume", () => containers.resumeLogs()).catch((err) => log.error({ err }, "could not resume container log writers"));
    // Pods cri-dockerd left running become cridock's (checkpoint, netns handle, IPs, CRI logs).
    await step("adopt", () =>
      adoptCriDockerdSandboxes({ docker, sandboxes, network, logs: logFollowers, criDockerdRoot: settings.criDockerdRootDirectory, log }),
    );
  })();
  // Handled where the caller awaits it; until then a failure must not count as unhandled.
  reconciled.catch(() => undefined);
  return reconciled;
}
