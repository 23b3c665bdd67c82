/**
 * In-place resize (UpdateContainerResources) on Docker's live update
 * (`POST /containers/{id}/update`), and the resources in force that
 * ContainerStatus reports back, read from the container's cgroup.
 *
 * A memory limit below what the container holds now cannot be enforced
 * without the kernel reclaiming or OOM-killing it, so it is refused up front
 * with FAILED_PRECONDITION naming both figures; kubelet retries the resize
 * later (it reports it as "Deferred"/"Infeasible").
 */
import type { DockerClient } from "../../docker/client.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { failedPrecondition, withContext } from "../../errors.ts";
import { readCgroupLimits } from "../../stats/cgroup-limits.ts";
import { CgroupReader } from "../../stats/cgroups.ts";
import { resourcesFromHostConfig, resourcesInForce, updateFor } from "./resources.ts";
import type { ResourceSpec } from "./spec.ts";
import type { OomScorePolicy } from "./oom-score.ts";

export class ContainerResizer {
  constructor(
    private readonly docker: DockerClient,
    private readonly oomScore?: OomScorePolicy,
    private readonly cgroups = new CgroupReader(),
  ) {}

  async update(c: ContainerInspect, requested: ResourceSpec): Promise<void> {
    const update = updateFor(requested, c.HostConfig, this.oomScore);
    if (Object.keys(update).length === 0) return;
    const name = c.Name.replace(/^\//, "") || c.Id;
    if (update.Memory !== undefined && c.State.Running && c.State.Pid > 0) {
      const sample = await this.cgroups.sample(c.State.Pid).catch(() => undefined);
      if (sample && BigInt(update.Memory) < sample.workingSetBytes) {
        throw failedPrecondition(
          `memory limit ${update.Memory} bytes is below the current usage of container ${name} ` +
            `(working set ${sample.workingSetBytes} bytes); lower the usage first or ask for at least that much`,
        );
      }
    }
    try {
      await this.docker.updateContainer(c.Id, update);
    } catch (err) {
      // The kernel refuses (EBUSY) a v1 limit it cannot reclaim down to.
      if (/device or resource busy|cannot set memory limit|minimum memory limit/i.test(String((err as Error).message))) {
        throw failedPrecondition(`updating the resources of container ${name}: the kernel refused the new limits`, err);
      }
      throw withContext(`updating the resources of container ${name}`, err, "UNKNOWN");
    }
  }

  /** Docker's record of the resources, with what the cgroup enforces when the container runs. */
  async inForce(c: ContainerInspect): Promise<ResourceSpec> {
    const fromDocker = resourcesFromHostConfig(c.HostConfig);
    if (!c.State.Running || c.State.Pid <= 0) return fromDocker;
    return resourcesInForce(fromDocker, await readCgroupLimits(this.cgroups, c.State.Pid));
  }
}
