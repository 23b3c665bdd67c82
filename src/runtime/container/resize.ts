/**
 * In-place resize (UpdateContainerResources) on Docker's live update
 * (`POST /containers/{id}/update`) and, for the `unified` keys Docker has no
 * field for, writes into the running container's own cgroup; and the
 * resources in force that ContainerStatus reports back, read from that
 * cgroup.
 *
 * A memory limit below what the container holds now cannot be enforced
 * without the kernel reclaiming or OOM-killing it, so it is refused up front
 * with FAILED_PRECONDITION naming both figures; kubelet retries the resize
 * later (it reports it as "Deferred"/"Infeasible").
 *
 * Docker cannot change a container's labels, where CreateContainer keeps the
 * unified keys, and cridock keeps no other state per container: a resize's
 * unified values live in the cgroup only. A container Docker started again
 * would get its create-time values back; under kubelet that never happens
 * (the restart policy is "no", kubelet creates a new container), and kubelet
 * sends its unified values again with every resize. ContainerStatus reads
 * back the keys the container was created with.
 *
 * Under the systemd cgroup driver Docker's update reaches the cgroup through
 * systemd, which applies the scope's properties anew and puts the files it
 * owns back to its own values: memory.oom.group went from 1 to 0 on a
 * `docker update -m` (Debian 12: systemd 252, Docker 20.10, runc 1.1). So
 * every unified value the container holds, asked by this request or an
 * earlier one, is written again once Docker's update is done.
 */
import type { DockerClient } from "../../docker/client.ts";
import type { ContainerInspect, Resources } from "../../docker/types.ts";
import { failedPrecondition, withContext } from "../../errors.ts";
import { readCgroupLimits } from "../../stats/cgroup-limits.ts";
import type { CgroupReader } from "../../stats/cgroups.ts";
import { resourcesFromHostConfig, resourcesInForce, updateFor } from "./resources.ts";
import type { ResourceSpec } from "./spec.ts";
import type { OomScorePolicy } from "./oom-score.ts";
import { unifiedFromLabels } from "./convert.ts";
import type { UnifiedCgroups } from "./unified-cgroup.ts";
import { planUnified } from "./unified.ts";
import { readKernelFile } from "../../stats/kernel-file.ts";
import { join } from "node:path";

export class ContainerResizer {
  constructor(
    private readonly docker: DockerClient,
    private readonly cgroups: CgroupReader,
    private readonly unified: UnifiedCgroups,
    private readonly oomScore?: OomScorePolicy,
  ) {}

  async update(c: ContainerInspect, requested: ResourceSpec): Promise<void> {
    const created = unifiedFromLabels(c.Config.Labels);
    const version = Object.keys(requested.unified).length + Object.keys(created).length > 0 ? await this.unified.version() : undefined;
    const { docker: update, files } = updateFor(requested, c.HostConfig, this.oomScore, version);
    const name = c.Name.replace(/^\//, "") || c.Id;
    const keys = Object.keys(files);
    const dir = keys.length > 0 ? await this.ownCgroup(c, name, keys) : await this.heldCgroup(c, created, version);
    if (dir) await this.unified.checkControllers(dir, Object.keys(requested.unified));
    if (update.Memory !== undefined && c.State.Running && c.State.Pid > 0) {
      const sample = await this.cgroups.sample(c.State.Pid).catch(() => undefined);
      if (sample && BigInt(update.Memory) < sample.workingSetBytes) {
        throw failedPrecondition(
          `memory limit ${update.Memory} bytes is below the current usage of container ${name} ` +
            `(working set ${sample.workingSetBytes} bytes); lower the usage first or ask for at least that much`,
        );
      }
    }
    // The files first (their values are the likelier to be refused), undone if Docker's update fails.
    let previous: [string, string][] = [];
    if (dir && keys.length > 0) {
      const written = await this.unified.write(dir, files, true);
      if (written.gone) throw failedPrecondition(`container ${name} exited; unified ${keys.join(", ")} could not be written`);
      previous = written.previous;
    }
    if (Object.keys(update).length === 0) return;
    const held = dir ? await this.heldValues(dir, created, c, files) : [];
    try {
      await this.dockerUpdate(c.Id, name, update);
    } catch (err) {
      if (dir) await this.unified.restore(dir, previous);
      throw err;
    }
    if (dir) await this.writeAgain(dir, held, files);
  }

  /** The running container's cgroup when it holds unified values of its creation (cgroup v2); else undefined. */
  private async heldCgroup(c: ContainerInspect, created: Record<string, string>, version: number | undefined): Promise<string | undefined> {
    if (version !== 2 || Object.keys(created).length === 0 || !c.State.Running || c.State.Pid <= 0) return undefined;
    return this.unified.containerDir(c.State.Pid, c.Id);
  }

  /**
   * The values the cgroup holds now for the creation-time keys this request
   * does not write. Only asked with the container's own cgroup in hand, which
   * is looked for on cgroup v2 alone (v1 refuses keys that need the file).
   */
  private async heldValues(dir: string, created: Record<string, string>, c: ContainerInspect, files: Record<string, string>): Promise<[string, string][]> {
    const keys = Object.keys(planUnified(created, c.HostConfig, 2).files).filter((key) => !(key in files));
    const held: [string, string][] = [];
    for (const key of keys) {
      const text = await readKernelFile(join(dir, key)).catch(() => undefined);
      if (text !== undefined) held.push([key, text.trim()]);
    }
    return held;
  }

  /** After Docker's update: the values held before it, and this request's, written again (systemd may have reset them). */
  private async writeAgain(dir: string, held: readonly [string, string][], files: Record<string, string>): Promise<void> {
    await this.unified.restore(dir, held);
    if (Object.keys(files).length > 0) await this.unified.write(dir, files);
  }

  /** The running container's own cgroup directory, where `keys` are to be written. */
  private async ownCgroup(c: ContainerInspect, name: string, keys: readonly string[]): Promise<string> {
    const dir = c.State.Running && c.State.Pid > 0 ? await this.unified.containerDir(c.State.Pid, c.Id) : undefined;
    if (!dir) {
      throw failedPrecondition(
        `container ${name} is not running: unified ${keys.join(", ")} have no Docker field and can only be written into the cgroup of a running container`,
      );
    }
    return dir;
  }

  private async dockerUpdate(id: string, name: string, update: Resources): Promise<void> {
    try {
      await this.docker.updateContainer(id, update);
    } catch (err) {
      // The kernel refuses (EBUSY) a v1 limit it cannot reclaim down to.
      if (/device or resource busy|cannot set memory limit|minimum memory limit/i.test(String((err as Error).message))) {
        throw failedPrecondition(`updating the resources of container ${name}: the kernel refused the new limits`, err);
      }
      throw withContext(`updating the resources of container ${name}`, err, "UNKNOWN");
    }
  }

  /** Docker's record of the resources, with what the cgroup enforces when the container runs (the unified keys it was given read back). */
  async inForce(c: ContainerInspect): Promise<ResourceSpec> {
    const fromDocker = resourcesFromHostConfig(c.HostConfig);
    if (!c.State.Running || c.State.Pid <= 0) return fromDocker;
    const keys = Object.keys(unifiedFromLabels(c.Config.Labels));
    return resourcesInForce(fromDocker, await readCgroupLimits(this.cgroups, c.State.Pid, keys));
  }
}
