/**
 * The container lifecycle's side of `unified` (unified.ts says which keys
 * go where): CreateContainer checks the keys against the pod's cgroup and
 * learns the cgroup version; StartContainer plans, before Docker's start,
 * which keys it must write, and writes them into the container's own cgroup
 * right after.
 */
import type { DockerClient } from "../../docker/client.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import type { Logger } from "../../log.ts";
import type { CgroupVersion } from "../../stats/cgroups.ts";
import type { StepTimer } from "../../steps.ts";
import type { SandboxView } from "../sandbox/view.ts";
import { unifiedFromLabels } from "./convert.ts";
import { planUnified } from "./unified.ts";
import type { CgroupDriver, UnifiedCgroups } from "./unified-cgroup.ts";

export class UnifiedSettings {
  constructor(
    private readonly docker: Pick<DockerClient, "inspectContainer">,
    private readonly cgroups: UnifiedCgroups,
    private readonly log: Logger,
    private readonly cgroupDriver?: () => Promise<CgroupDriver>,
  ) {}

  /**
   * The node's cgroup version, for a request with `unified` keys; on cgroup
   * v2 each key's controller and interface file are checked against the
   * pod's cgroup (the container's own does not exist before its start).
   */
  async checkBeforeCreate(keys: readonly string[], view: SandboxView): Promise<CgroupVersion> {
    const version = await this.cgroups.version();
    if (version === 2) {
      // Without the engine's answer, a parent that is a bare slice name is systemd's.
      const driver = (await this.cgroupDriver?.()) ?? (/^[^/]+\.slice$/.test(view.cgroupParent) ? "systemd" : "cgroupfs");
      await this.cgroups.checkBeforeCreate(keys, view.cgroupParent, driver);
    }
    return version;
  }

  /**
   * The keys the start must write into the container's cgroup (those
   * without a Docker field), from the label CreateContainer left; undefined
   * when none. Asked before the start: a key this node cannot carry out
   * (cgroup v1) starts nothing.
   */
  async filesForStart(c: ContainerInspect): Promise<Record<string, string> | undefined> {
    const unified = unifiedFromLabels(c.Config.Labels);
    if (Object.keys(unified).length === 0) return undefined;
    const { files } = planUnified(unified, c.HostConfig, await this.cgroups.version());
    return Object.keys(files).length > 0 ? files : undefined;
  }

  /**
   * Writes `files` into the just started container's own cgroup. They can
   * only be written after its process starts: Docker's API has no OCI
   * `unified` field to hand them to runc, and runc creates the container's
   * cgroup when it starts the container. Until the writes the process runs
   * without them: the window from the start call's return (`since`) to the
   * last write, one inspect (the start's answer carries no pid), one
   * /proc/<pid>/cgroup read and the writes, is returned (ms) for the
   * "started container" log line's `unifiedWindowMs`. A container that
   * exited within it is left as it is.
   */
  async writeAfterStart(id: string, files: Record<string, string>, since: number, timer: StepTimer): Promise<number> {
    const state = (await this.docker.inspectContainer(id)).State;
    const dir = state.Running && state.Pid > 0 ? await this.cgroups.containerDir(state.Pid, id) : undefined;
    const { gone } = dir ? await this.cgroups.write(dir, files) : { gone: true };
    const windowMs = Math.round((performance.now() - since) * 100) / 100;
    timer.record("cgroup.unified", windowMs);
    if (gone) this.log.info({ container: id, keys: Object.keys(files) }, "container exited before its unified cgroup settings could be written");
    return windowMs;
  }
}
