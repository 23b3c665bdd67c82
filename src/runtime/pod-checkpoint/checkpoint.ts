/**
 * CheckpointPod (KEP-5823): the pod's selected containers checkpointed at
 * one cut into one archive at output_path.
 *
 *   1. everything checked before anything is touched: options, output_path
 *      (request.ts), the sandbox, each container (it exists, belongs to the
 *      pod, runs), dockerd's experimental mode;
 *   2. every selected container paused (Docker's pause: the cgroup freezer),
 *      so no container runs on while another is dumped;
 *   3. each one checkpointed by CheckpointContainer's own code
 *      (container/checkpoint.ts) into a work directory: CRIU dumps the
 *      frozen processes and leaves them as they were;
 *   4. every paused container resumed, whatever happened in 2 or 3;
 *   5. the manifest and the containers' archives written to output_path
 *      through a temporary file and a rename (archive.ts).
 *
 * The caller's deadline (or a cancel) stops the work between containers:
 * the dump in flight, which Docker would finish anyway, is waited for, so
 * that the resume does not race CRIU putting back the freezer state it
 * found; then everything is resumed and the call fails with
 * DEADLINE_EXCEEDED. The work directory and any temporary file go on every
 * path; nothing is left at output_path unless the whole archive is there.
 */
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { isNotFound } from "../../docker/errors.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { CridockError, describeCause, failedPrecondition, invalidArgument, notFound } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { StepTimer } from "../../steps.ts";
import { SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL } from "../labels.ts";
import { validateId } from "../lookup.ts";
import type { ResolvedSandbox } from "../sandbox/queries.ts";
import { abortError, requireCheckpoints, workDirectory } from "./shared.ts";
import { writePodArchive } from "./archive.ts";
import { capturedSpec } from "./capture.ts";
import { buildManifest, containerMember, MAX_CONTAINERS } from "./manifest.ts";
import { checkedOptions, checkedOutputPath } from "./request.ts";

const RESUMED = "every container was resumed and nothing was written";

export interface PodCheckpointDeps {
  docker: DockerClient;
  sandboxes: { resolve(id: string): Promise<ResolvedSandbox | undefined> };
  /** CheckpointContainer's own path (container/manager.ts). */
  containers: { checkpoint(id: string, location: string, timeoutSeconds: bigint, signal: AbortSignal): Promise<unknown> };
  log: Logger;
  rootDirectory: string;
}

export interface PodCheckpointRequest {
  sandboxId: string;
  outputPath: string;
  /** Empty: every running container of the pod. */
  containerIds: string[];
  options: Record<string, string>;
}

export interface PodCheckpointResult {
  path: string;
  bytes: number;
  containers: string[];
  /** How long the containers were paused. */
  pausedMs: number;
}

/** How often, and how long apart, a resume Docker refused is tried again (a dump may still hold the container). */
const RESUME_TRIES = 10;
const RESUME_RETRY_MS = 1000;

export class PodCheckpointer {
  private readonly log: Logger;

  constructor(private readonly deps: PodCheckpointDeps) {
    this.log = deps.log.child({ component: "pod-checkpoint" });
  }

  async checkpoint(request: PodCheckpointRequest, signal: AbortSignal): Promise<PodCheckpointResult> {
    const timer = new StepTimer("CheckpointPod");
    checkedOptions(request.options, "CheckpointPod");
    const path = await checkedOutputPath(request.outputPath);
    const sandbox = await this.deps.sandboxes.resolve(validateId(request.sandboxId, "pod sandbox"));
    if (!sandbox) throw notFound(`pod sandbox ${request.sandboxId} does not exist`);
    const spec = sandbox.record?.spec;
    if (!spec) throw failedPrecondition(`pod sandbox ${sandbox.id} has no record of its configuration in cridock's root directory; it cannot be checkpointed`);
    const pod = `${spec.metadata.namespace}/${spec.metadata.name}`;
    if (spec.userns) throw failedPrecondition(`pod ${pod} runs in its own user namespace, which cridock cannot checkpoint`);
    const selected = await timer.time("containers.select", () => this.select(sandbox.id, request.containerIds));
    await requireCheckpoints(this.deps.docker, `cannot checkpoint pod ${pod}`);
    const work = await workDirectory(this.deps.rootDirectory, `pod-${sandbox.id.slice(0, 12)}-`);
    try {
      const { archives, pausedMs } = await this.dumpAll(selected, work, signal, timer, pod);
      const manifest = buildManifest(sandbox.id, spec, selected.map((c) => ({ id: c.Id, spec: capturedSpec(c, spec.logDirectory) })), new Date());
      await timer.time("archive.write", () => writePodArchive(path, manifest, archives, signal)).catch((err: unknown) => {
        throw signal.aborted ? abortError(signal, `writing the archive of pod ${pod}`, "nothing was written", err) : err;
      });
      const bytes = (await stat(path)).size;
      const result = { path, bytes, containers: selected.map((c) => c.Id), pausedMs };
      this.log.info({ sandboxId: sandbox.id, pod, path, bytes, containers: result.containers, pausedMs }, "checkpointed pod");
      timer.finish(this.log, { sandboxId: sandbox.id });
      return result;
    } finally {
      await rm(work, { recursive: true, force: true }).catch((err) => this.log.warn({ work, err }, "could not remove a pod checkpoint's work directory"));
    }
  }

  /**
   * The containers to checkpoint, inspected: the named ones (each a
   * container of this pod that runs), or every running one of the pod.
   */
  private async select(sandboxId: string, ids: readonly string[]): Promise<ContainerInspect[]> {
    const docker = this.deps.docker;
    if (ids.length > MAX_CONTAINERS) throw invalidArgument(`container_ids names ${ids.length} containers; a pod checkpoint takes at most ${MAX_CONTAINERS}`);
    let found: ContainerInspect[];
    if (ids.length === 0) {
      const listed = await docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_CONTAINER}`, `${SANDBOX_ID_LABEL}=${sandboxId}`] });
      const inspected = await Promise.all(listed.filter((s) => s.State === "running").map((s) => docker.inspectContainer(s.Id).catch(() => undefined)));
      // Oldest first, as kubelet created them (Docker lists newest first): the archive and
      // RestorePod then follow the pod's own order.
      found = inspected.filter((c): c is ContainerInspect => c !== undefined && c.State.Running && !c.State.Paused).sort(byCreation);
      if (found.length === 0) throw failedPrecondition(`pod sandbox ${sandboxId} has no running container to checkpoint`);
    } else {
      found = [];
      for (const id of ids) {
        validateId(id, "container");
        const c = await docker.inspectContainer(id).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
        if (!c || c.Config.Labels?.[TYPE_LABEL] !== TYPE_CONTAINER) throw notFound(`container ${id} does not exist`);
        if (c.Config.Labels[SANDBOX_ID_LABEL] !== sandboxId) throw invalidArgument(`container ${id} is not a container of pod sandbox ${sandboxId}`);
        if (found.some((f) => f.Id === c.Id)) throw invalidArgument(`container_ids names container ${c.Id.slice(0, 12)} twice`);
        if (!c.State.Running || c.State.Paused) throw failedPrecondition(`container ${id} is ${c.State.Status}; only running containers can be checkpointed`);
        found.push(c);
      }
    }
    const names = new Set<string>();
    for (const c of found) {
      const name = capturedSpec(c, "").name;
      // The manifest names each container's archive after it: two of one name would be one archive.
      if (names.has(name)) throw failedPrecondition(`pod sandbox ${sandboxId} has two containers named ${name} (attempts); name the one to checkpoint in container_ids`);
      names.add(name);
    }
    return found;
  }

  /** Steps 2 to 4: pause all, checkpoint each, resume all. Member name → archive file. */
  private async dumpAll(
    selected: readonly ContainerInspect[],
    work: string,
    signal: AbortSignal,
    timer: StepTimer,
    pod: string,
  ): Promise<{ archives: Map<string, string>; pausedMs: number }> {
    const archives = new Map<string, string>();
    const paused: string[] = [];
    const pausedAt = performance.now();
    // Each dump runs to its end once begun (see above); CheckpointContainer's own deadline still bounds it.
    const dumps = new AbortController().signal;
    let failure: unknown;
    try {
      await timer.time("docker.pause", async () => {
        for (const c of selected) {
          if (signal.aborted) throw abortError(signal, `pausing the containers of pod ${pod}`, RESUMED);
          await this.deps.docker.pauseContainer(c.Id).catch((err: unknown) => {
            throw new CridockError(err instanceof CridockError ? err.code : "UNKNOWN", `pausing container ${c.Id.slice(0, 12)} of pod ${pod}`, { cause: err });
          });
          paused.push(c.Id);
        }
      });
      for (const [i, c] of selected.entries()) {
        if (signal.aborted) throw abortError(signal, `checkpointing pod ${pod} (${i} of ${selected.length} containers done)`, RESUMED);
        const file = join(work, `${i}.tar`);
        await timer.time("container.checkpoint", () => this.deps.containers.checkpoint(c.Id, file, 0n, dumps));
        archives.set(containerMember(capturedSpec(c, "").name), file);
      }
      if (signal.aborted) throw abortError(signal, `checkpointing pod ${pod}`, RESUMED);
    } catch (err) {
      failure = err;
    }
    const pausedMs = Math.round(performance.now() - pausedAt);
    const unresumed = await timer.time("docker.unpause", () => this.resumeAll(paused));
    if (unresumed.length > 0) {
      const message = `could not resume container${unresumed.length > 1 ? "s" : ""} ${unresumed.join(", ")} of pod ${pod} after its checkpoint; docker unpause them`;
      this.log.error({ pod, unresumed, err: failure }, message);
      throw new CridockError("UNKNOWN", failure ? `${message} (the checkpoint had failed: ${describeCause(failure)})` : message, { cause: failure });
    }
    if (failure !== undefined) throw failure;
    return { archives, pausedMs };
  }

  /** Unpauses each container; the ids still paused after all tries. */
  private async resumeAll(ids: readonly string[]): Promise<string[]> {
    const left: string[] = [];
    await Promise.all(
      ids.map(async (id) => {
        for (let attempt = 1; ; attempt++) {
          try {
            await this.deps.docker.unpauseContainer(id);
            return;
          } catch (err) {
            // Gone, stopped or unpaused by someone else meanwhile: nothing of ours is paused.
            const now = await this.deps.docker.inspectContainer(id).catch((e: unknown) => (isNotFound(e) ? undefined : null));
            if (now === undefined || (now && !now.State.Paused)) return;
            if (attempt >= RESUME_TRIES) {
              this.log.warn({ container: id, err }, "could not resume a container paused for a pod checkpoint");
              left.push(id.slice(0, 12));
              return;
            }
            await new Promise((r) => setTimeout(r, RESUME_RETRY_MS));
          }
        }
      }),
    );
    return left;
  }

}

/** Docker's RFC 3339 creation times, to the nanosecond (two containers are often made in one millisecond). */
export function byCreation(a: Pick<ContainerInspect, "Created" | "Id">, b: Pick<ContainerInspect, "Created" | "Id">): number {
  const [sa, na] = creationKey(a.Created);
  const [sb, nb] = creationKey(b.Created);
  return sa - sb || na - nb || a.Id.localeCompare(b.Id);
}

function creationKey(created: string): [number, number] {
  const match = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(.*)$/.exec(created);
  if (!match) return [Number.POSITIVE_INFINITY, 0];
  const seconds = Date.parse(`${match[1]}${match[3]}`);
  return [Number.isNaN(seconds) ? Number.POSITIVE_INFINITY : seconds, Number((match[2] ?? "").padEnd(9, "0"))];
}
