/**
 * RestorePod (KEP-5823): a pod checkpoint archive (archive.ts) made into a
 * new sandbox with its containers CREATED; StartContainer then restores
 * each one's processes, with their memory, as for a container created from
 * a single checkpoint (container/checkpoint-restore.ts).
 *
 *   1. checked before anything is created: options, checkpoint_path
 *      (request.ts), dockerd's experimental mode, the archive (its tar, its
 *      manifest: archive.ts, manifest.ts), the sandbox and container
 *      configurations (the request's where it gives them, the manifest's
 *      otherwise), as RunPodSandbox and CreateContainer check theirs;
 *   2. a new sandbox, as RunPodSandbox makes one: its own network namespace
 *      and IP from CNI;
 *   3. each container created from its checkpoint archive, which
 *      CreateContainer's restore path reads and checks in full and stages
 *      into the container.
 *
 * A failure or the caller's deadline at any step undoes the steps done:
 * the containers removed, the sandbox stopped (CNI DEL, netns released)
 * and removed. The archive's copies in the work directory go on every path.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { CridockError, describeCause, failedPrecondition, invalidArgument } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { StepTimer } from "../../steps.ts";
import { validateSpec } from "../container/create.ts";
import type { ContainerSpec } from "../container/spec.ts";
import type { SandboxSpec } from "../sandbox/spec.ts";
import { abortError, requireCheckpoints, workDirectory } from "./shared.ts";
import { readPodArchive } from "./archive.ts";
import { checkedArchivePath, checkedOptions } from "./request.ts";

const UNDONE = "what was created is removed";

export interface PodRestoreDeps {
  docker: DockerClient;
  sandboxes: {
    run(spec: SandboxSpec, signal?: AbortSignal): Promise<string>;
    stop(id: string): Promise<void>;
    remove(id: string): Promise<void>;
  };
  containers: {
    create(sandboxId: string, spec: ContainerSpec, options?: { restoreSource?: string }): Promise<string>;
    remove(id: string): Promise<void>;
  };
  log: Logger;
  rootDirectory: string;
}

export interface PodRestoreRequest {
  checkpointPath: string;
  /** The new sandbox's configuration (RestorePod's config); absent: the checkpointed one's, from the manifest. */
  sandbox?: SandboxSpec;
  /** Overrides the sandbox's runtime handler when set. */
  runtimeHandler: string;
  options: Record<string, string>;
  /** Configurations for containers of the archive, matched by name; the manifest's for the others. */
  containers: ContainerSpec[];
}

export interface PodRestoreResult {
  sandboxId: string;
  containers: { name: string; id: string }[];
}

export class PodRestorer {
  private readonly log: Logger;

  constructor(private readonly deps: PodRestoreDeps) {
    this.log = deps.log.child({ component: "pod-restore" });
  }

  async restore(request: PodRestoreRequest, signal: AbortSignal): Promise<PodRestoreResult> {
    const timer = new StepTimer("RestorePod");
    checkedOptions(request.options, "RestorePod");
    const { path } = await checkedArchivePath(request.checkpointPath);
    await requireCheckpoints(this.deps.docker, `cannot restore from ${path}`);
    const work = await workDirectory(this.deps.rootDirectory, "pod-restore-");
    try {
      const archive = await timer.time("archive.read", () => readPodArchive(path, work, signal));
      const sandbox = request.sandbox ?? archive.manifest.sandbox.spec;
      if (request.runtimeHandler) sandbox.runtimeHandler = request.runtimeHandler;
      const pod = `${sandbox.metadata.namespace}/${sandbox.metadata.name}`;
      if (sandbox.userns) throw failedPrecondition(`pod ${pod} asks for its own user namespace, which cridock cannot restore a checkpoint into`);
      const plans = containerPlans(archive.manifest.containers.map((c) => c.name), archive.manifest, request.containers, archive.containers);
      const result = await this.create(sandbox, plans, path, signal, timer, pod);
      this.log.info({ path, pod, sandboxId: result.sandboxId, containers: result.containers }, "restored pod from its checkpoint");
      timer.finish(this.log, { sandboxId: result.sandboxId });
      return result;
    } finally {
      await rm(work, { recursive: true, force: true }).catch((err) => this.log.warn({ work, err }, "could not remove a pod restore's work directory"));
    }
  }

  /** Steps 2 and 3, undone on failure. */
  private async create(sandbox: SandboxSpec, plans: ContainerSpec[], path: string, signal: AbortSignal, timer: StepTimer, pod: string): Promise<PodRestoreResult> {
    let sandboxId = "";
    const created: { name: string; id: string }[] = [];
    try {
      sandboxId = await timer.time("sandbox.run", () => this.deps.sandboxes.run(sandbox, signal));
      for (const spec of plans) {
        if (signal.aborted) throw abortError(signal, `restoring pod ${pod} (${created.length} of ${plans.length} containers created)`, UNDONE);
        const id = await timer.time("container.create", () => this.deps.containers.create(sandboxId, spec, { restoreSource: `container ${spec.name} of pod checkpoint ${path}` }));
        created.push({ name: spec.name, id });
      }
      if (signal.aborted) throw abortError(signal, `restoring pod ${pod}`, UNDONE);
      return { sandboxId, containers: created };
    } catch (err) {
      const left = await timer.time("undo", () => this.undo(sandboxId, created));
      const failure = signal.aborted && !(err instanceof CridockError && err.code === "DEADLINE_EXCEEDED") ? abortError(signal, `restoring pod ${pod}`, UNDONE, err) : err;
      if (left.length === 0) throw failure;
      throw new CridockError(failure instanceof CridockError ? failure.code : "UNKNOWN", `restoring pod ${pod} from ${path} failed (${describeCause(failure)}), and ${left.join("; ")} could not be removed`, { cause: failure });
    }
  }

  /** Removes what a failed restore made; what could not be removed, said. */
  private async undo(sandboxId: string, created: readonly { name: string; id: string }[]): Promise<string[]> {
    const left: string[] = [];
    for (const c of [...created].reverse()) {
      await this.deps.containers.remove(c.id).catch((err: unknown) => {
        this.log.warn({ container: c.id, err }, "could not remove a container of a failed pod restore");
        left.push(`container ${c.id.slice(0, 12)}`);
      });
    }
    if (sandboxId) {
      try {
        await this.deps.sandboxes.stop(sandboxId);
        await this.deps.sandboxes.remove(sandboxId);
      } catch (err) {
        this.log.warn({ sandboxId, err }, "could not remove the sandbox of a failed pod restore");
        left.push(`pod sandbox ${sandboxId.slice(0, 12)}`);
      }
    }
    return left;
  }
}

/**
 * The container configurations to create, in the manifest's order: the
 * request's for the names it gives (each a container of the archive, once),
 * the manifest's for the others; each names its archive copy as the image
 * (CreateContainer's restore from an archive path) and is checked as
 * CreateContainer checks a request, before anything is created.
 */
export function containerPlans(
  names: readonly string[],
  manifest: { containers: readonly { name: string; spec: Omit<ContainerSpec, "resources" | "security"> }[] },
  requested: readonly ContainerSpec[],
  archives: ReadonlyMap<string, string>,
): ContainerSpec[] {
  const given = new Map<string, ContainerSpec>();
  for (const spec of requested) {
    if (!names.includes(spec.name)) throw invalidArgument(`container_configs names container ${JSON.stringify(spec.name.slice(0, 80))}, which the checkpoint does not hold (it holds ${names.join(", ")})`);
    if (given.has(spec.name)) throw invalidArgument(`container_configs names container ${spec.name} twice`);
    given.set(spec.name, spec);
  }
  return manifest.containers.map((c) => {
    const archive = archives.get(c.name);
    if (!archive) throw invalidArgument(`the checkpoint has no archive for container ${c.name}`);
    const spec: ContainerSpec = { ...(given.get(c.name) ?? c.spec), image: archive };
    validateSpec(spec);
    return spec;
  });
}

