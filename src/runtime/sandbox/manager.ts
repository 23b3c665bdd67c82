/**
 * Pod sandboxes, dockershim-style: a pause container holding the pod's
 * namespaces, its network set up by the pod network layer against a
 * persistent netns handle, its state checkpointed so every step can be
 * finished or undone after a crash. Operations on one sandbox are serialized
 * (KeyedMutex); different sandboxes proceed in parallel.
 */
import { createInUserns, usernsClash, usernsEdit, usernsLayer, type UsernsHolder } from "../pod-userns.ts";
import type { OciLayer } from "../../oci/layer.ts";
import { SpecEditsStore } from "../../oci/edits-store.ts";
import { SPEC_EDITS_VERSION } from "../../oci/spec-edits.ts";
import type { UsernsSupport } from "../../oci/userns-support.ts";
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { isConflict, isNoSuchImage, isNotFound } from "../../docker/errors.ts";
import { CridockError, describeCause, failedPrecondition, invalidArgument, notFound } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { PodNetwork } from "../../network/plugin.ts";
import { unpinNetns } from "../../network/netns.ts";
import type { CheckpointStore } from "../../store/checkpoint.ts";
import { StepTimer } from "../../steps.ts";
import { KeyedMutex } from "../keyed-mutex.ts";
import { removedMeanwhile, validateId } from "../lookup.ts";
import { sandboxName } from "../naming.ts";
import { hostCapabilities, privilegedStartFailure } from "../container/capabilities.ts";
import { sandboxCreateBody } from "./docker.ts";
import { removeSandbox, stopSandbox, type TeardownContext } from "./teardown.ts";
import { attachNetwork, bandwidthFromAnnotationsSafe, networkRequest } from "./network.ts";
import { dockerBridgeIps, listSandboxes, resolveSandboxPrefix, sandboxStatus, sandboxView, type ResolvedSandbox } from "./queries.ts";
import {
  dockerTimeToNanos,
  type SandboxListFilter,
  type SandboxRecord,
  type SandboxStatusInfo,
  type SandboxSummary,
} from "./record.ts";
import { bandwidthFromAnnotations, validateSandboxSpec, type SandboxSpec } from "./spec.ts";
import type { SandboxLookup, SandboxView } from "./view.ts";
import type { OomScorePolicy } from "../container/oom-score.ts";
import type { ImageFileReader } from "../image-files.ts";
import { needsPasswd, parsePasswd, requestedUser, strictUserString } from "../strict-user.ts";

export interface SandboxManagerOptions {
  docker: DockerClient;
  network: PodNetwork;
  store: CheckpointStore<SandboxRecord>;
  log: Logger;
  pauseImage: string;
  /** Pulls the image when absent, logging progress (ImageManager.ensureImage). */
  ensureImage: (reference: string, signal?: AbortSignal) => Promise<{ id: string; inspect?: { Config?: { User?: string } | null } }>;
  /** Reads the pause image's /etc/passwd for the Strict policy (image-files.ts). */
  files: ImageFileReader;
  rootDirectory: string;
  logMaxSize: string;
  logMaxFile: number;
  /** Whether (and to what) oom_score_adj is clamped on this host (container/oom-score.ts). */
  oomScore?: OomScorePolicy;
  cgroupDriver: () => Promise<"systemd" | "cgroupfs">;
  /** Docker runtime names (docker info .Runtimes). */
  runtimeNames: () => Promise<string[]>;
  /** Called for each workload container RemovePodSandbox removed (its log writer's state goes with it). */
  containerRemoved?: (containerId: string) => Promise<void>;
  /** Whether the node can give pods their own user namespace (src/oci/userns-support.ts). */
  userns?: () => Promise<UsernsSupport>;
}

type Resolved = ResolvedSandbox;

export class SandboxManager implements SandboxLookup {
  private readonly docker: DockerClient;
  private readonly network: PodNetwork;
  private readonly store: CheckpointStore<SandboxRecord>;
  private readonly log: Logger;
  private readonly locks = new KeyedMutex();
  /** Checkpoints, mirrored in memory: the store is written through, read only at start. */
  readonly records = new Map<string, SandboxRecord>();
  /** What Stop and Remove (teardown.ts) need of the manager. */
  private readonly teardown: TeardownContext;

  constructor(private readonly options: SandboxManagerOptions) {
    this.docker = options.docker;
    this.network = options.network;
    this.store = options.store;
    this.log = options.log.child({ component: "sandboxes" });
    this.teardown = {
      docker: this.docker,
      network: this.network,
      log: this.log,
      saveRecord: (record, timer) => this.saveRecord(record, timer),
      dropRecord: (id, timer) => this.dropRecord(id, timer),
      setRecord: (record) => void this.records.set(record.id, record),
      containerRemoved: options.containerRemoved,
    };
  }

  netnsPathOf(id: string): string {
    return join(this.options.rootDirectory, "netns", id);
  }

  /** Serializes `fn` with every other operation on sandbox `id`. */
  withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.run(id, fn);
  }

  async saveRecord(record: SandboxRecord, timer?: StepTimer): Promise<void> {
    const t0 = performance.now();
    await this.store.write(record.id, record);
    timer?.record("checkpoint.write", performance.now() - t0);
    this.records.set(record.id, record);
  }

  async dropRecord(id: string, timer?: StepTimer): Promise<void> {
    const t0 = performance.now();
    await this.store.remove(id);
    timer?.record("checkpoint.remove", performance.now() - t0);
    this.records.delete(id);
  }

  // ---- RunPodSandbox -------------------------------------------------------

  async run(spec: SandboxSpec, signal?: AbortSignal): Promise<string> {
    validateSandboxSpec(spec);
    const hostNetwork = spec.namespaces.network === "node";
    if (spec.runtimeHandler && !(await this.options.runtimeNames()).includes(spec.runtimeHandler)) {
      throw invalidArgument(
        `runtime handler "${spec.runtimeHandler}" is not a Docker runtime; dockerd knows ${(await this.options.runtimeNames()).join(", ") || "none"}`,
      );
    }
    if (!hostNetwork && this.network.kind === "cni") {
      const readiness = this.network.readiness();
      if (!readiness.ready) throw failedPrecondition(`pod network is not ready (${readiness.reason}): ${readiness.message}`);
    }
    const pod = `${spec.metadata.namespace}/${spec.metadata.name}`;
    if (spec.userns && spec.runtimeHandler) {
      throw failedPrecondition(`pod ${pod} asks for its own user namespace under runtime handler "${spec.runtimeHandler}", which cannot give one: only the default handler runs through cridock's runtime layer`);
    }
    const usernsLayerOf = spec.userns ? await usernsLayer(this.options.userns, `pod ${pod}`) : undefined;
    // The pod's host ids are its own: none of another live pod's, held from here until its checkpoint lists it.
    const unclaim = spec.userns ? this.claimUserns(spec, pod) : undefined;
    try {
      return await this.create(spec, pod, usernsLayerOf, signal);
    } finally {
      unclaim?.();
    }
  }

  /** Host ids claimed by RunPodSandbox calls whose checkpoint is not written yet. */
  private readonly usernsClaims = new Set<UsernsHolder>();

  /**
   * Refuses `spec`'s mappings when they overlap those of another pod's live
   * sandbox (recorded, or being created), and claims them until the caller
   * lets go. A sandbox of the same pod (another attempt) shares them by
   * design; a stopped one holds no process, and kubelet may give its ids on.
   */
  private claimUserns(spec: SandboxSpec, pod: string): () => void {
    const holders: UsernsHolder[] = [...this.usernsClaims];
    for (const r of this.records.values()) {
      if (r.phase !== "stopped" && r.spec.userns) {
        holders.push({ sandboxId: r.id, pod: `${r.spec.metadata.namespace}/${r.spec.metadata.name}`, podUid: r.spec.metadata.uid, mappings: r.spec.userns });
      }
    }
    const clash = usernsClash(spec.userns!, spec.metadata.uid, holders);
    if (clash) throw clash;
    const claim: UsernsHolder = { sandboxId: "", pod, podUid: spec.metadata.uid, mappings: spec.userns! };
    this.usernsClaims.add(claim);
    return () => void this.usernsClaims.delete(claim);
  }

  private async create(spec: SandboxSpec, pod: string, usernsLayerOf: OciLayer | undefined, signal: AbortSignal | undefined): Promise<string> {
    const hostNetwork = spec.namespaces.network === "node";
    const bandwidth = bandwidthFromAnnotations(spec.annotations);
    const log = this.log.child({ pod, attempt: spec.metadata.attempt });
    const fail = (step: string, err: unknown) =>
      new CridockError(err instanceof CridockError ? err.code : "UNKNOWN", `RunPodSandbox for pod ${pod}: ${step}`, { cause: err });
    const timer = new StepTimer("RunPodSandbox");

    let body;
    try {
      body = await sandboxCreateBody(spec, {
        image: this.options.pauseImage,
        cgroupDriver: await this.options.cgroupDriver(),
        networkKind: this.network.kind,
        rootDirectory: this.options.rootDirectory,
        logMaxSize: this.options.logMaxSize,
        logMaxFile: this.options.logMaxFile,
        oomScore: this.options.oomScore,
      });
      if (spec.security.supplementalGroupsStrict) body.User = await timer.time("image.user", () => this.strictUser(spec, signal));
      if (spec.userns && usernsLayerOf) createInUserns(body, spec.userns, usernsLayerOf);
    } catch (err) {
      if (err instanceof CridockError && (err.code === "INVALID_ARGUMENT" || err.code === "FAILED_PRECONDITION")) throw err;
      throw fail("building the pause container configuration", err);
    }
    // The pause image is checked by the create itself: only when Docker lacks it is it pulled (and the create retried).
    const name = sandboxName(spec.metadata, spec.metadata.attempt);
    let id: string;
    try {
      id = await timer.time("docker.create", () => this.createContainer(name, body));
    } catch (err) {
      if (!isNoSuchImage(err)) throw fail("creating the pause container", err);
      try {
        await timer.time("image.ensure", () => this.options.ensureImage(this.options.pauseImage, signal));
      } catch (err) {
        throw fail(`ensuring the pause image ${this.options.pauseImage}`, err);
      }
      try {
        id = await timer.time("docker.create", () => this.createContainer(name, body));
      } catch (err) {
        throw fail("creating the pause container", err);
      }
    }

    return await this.withLock(id, async () => {
      const record: SandboxRecord = {
        id,
        spec,
        // Listed from the moment the checkpoint exists, so it needs a creation
        // time already: ours until Docker's own is read after the start.
        createdAt: (BigInt(Date.now()) * 1_000_000n).toString(),
        phase: "creating",
        hostNetwork,
        networkKind: this.network.kind,
        netnsPath: "",
        network: { phase: "none", name: "", ips: [], result: null },
      };
      let step = "writing the sandbox checkpoint";
      try {
        await this.saveRecord(record, timer);
        step = "starting the pause container";
        const start = () => this.docker.startContainer(id);
        await timer.time("docker.start", () =>
          spec.userns && usernsLayerOf
            ? new SpecEditsStore(usernsLayerOf.editsDir).around(id, { version: SPEC_EDITS_VERSION, userns: usernsEdit(spec.userns, true, []) }, start, (err) =>
                log.warn({ sandboxId: id, err }, "could not remove the pause container's spec edits"),
              )
            : start(),
        );
        const inspect = await timer.time("docker.inspect", () => this.docker.inspectContainer(id));
        record.createdAt = dockerTimeToNanos(inspect.Created).toString();
        if (!inspect.State.Running) throw new Error(`the pause container exited at once (exit code ${inspect.State.ExitCode}) ${inspect.State.Error}`);
        if (!hostNetwork && this.network.kind === "cni") {
          step = "setting up the pod network";
          // One write covers both: the handle path (so recovery can release it) and that ADD may have begun.
          record.netnsPath = this.netnsPathOf(id);
          record.network.phase = "attaching";
          await this.saveRecord(record, timer);
          await attachNetwork(this.network, record, inspect.State.Pid, bandwidth, timer, signal, (s) => (step = s));
        } else if (!hostNetwork) {
          const ips = dockerBridgeIps(inspect);
          record.network = { phase: "attached", name: "docker-bridge", ips, result: inspect.NetworkSettings };
          if (ips.length === 0) throw new Error("Docker gave the pause container no IP address");
        }
        step = "writing the sandbox checkpoint";
        record.phase = "ready";
        await this.saveRecord(record, timer);
        log.info({ sandboxId: id, ips: record.network.ips }, "pod sandbox is ready");
        timer.finish(log, { sandboxId: id });
        return id;
      } catch (err) {
        log.warn({ sandboxId: id, step, err: describeCause(err) }, "RunPodSandbox failed; undoing the finished steps");
        await this.undo(record, bandwidth);
        // Docker's own start error for a privileged pod it cannot run ("unable to apply caps") names nothing useful.
        const refused = spec.security.privileged
          ? privilegedStartFailure(err, await hostCapabilities().catch(() => undefined), `pod sandbox ${pod}`)
          : undefined;
        throw fail(step, refused ?? err);
      }
    });
  }

  /**
   * Creates the pause container under the pod attempt's name. The name is
   * the reservation: while a container holds it (in any state) a second
   * RunPodSandbox for the same attempt is ALREADY_EXISTS naming it, as
   * containerd reserves names. Never removing the holder keeps racing calls
   * from destroying each other's pause container; a leftover of a crashed
   * create is removed by recovery at start, or by RemovePodSandbox.
   */
  private async createContainer(name: string, body: Parameters<DockerClient["createContainer"]>[1]): Promise<string> {
    try {
      return (await this.docker.createContainer(name, body)).Id;
    } catch (err) {
      if (!isConflict(err)) throw err;
      const holder = await this.docker.inspectContainer(name).catch(() => undefined);
      throw new CridockError(
        "ALREADY_EXISTS",
        holder
          ? `this pod attempt already has sandbox ${holder.Id} (${holder.State.Status}); remove it first or use another attempt`
          : `the sandbox name ${name} is taken by a container being removed; retry`,
        { cause: err },
      );
    }
  }

  /**
   * Undoes whatever a failed or interrupted RunPodSandbox finished; logs,
   * never throws. When a step cannot be undone the checkpoint stays, so a
   * later Stop/Remove or the next start retries it.
   */
  async undo(record: SandboxRecord, bandwidth = bandwidthFromAnnotationsSafe(record.spec.annotations)): Promise<void> {
    const log = this.log.child({ sandboxId: record.id });
    let clean = true;
    if (record.network.phase === "attaching" || record.network.phase === "attached") {
      try {
        // The sandbox goes away whatever DEL says (as in RemovePodSandbox): a DEL that fails as its ADD
        // did (host-local with no range yet) must not keep the netns handle and checkpoint forever.
        const left = record.networkKind === "cni" ? await this.network.tearDown(networkRequest(record, bandwidth), { force: true }) : [];
        if (left.length > 0) log.error({ failures: left }, "undo: CNI DEL failed; what these plugins set up for the pod may remain");
        record.network.phase = "detached";
      } catch (err) {
        clean = false;
        log.error({ err: describeCause(err) }, "undo: tearing down the pod network failed");
      }
    }
    if (clean) {
      try {
        await unpinNetns(record.netnsPath);
      } catch (err) {
        clean = false;
        log.error({ err: describeCause(err) }, "undo: releasing the netns handle failed");
      }
    }
    try {
      await this.docker.removeContainer(record.id, { force: true });
    } catch (err) {
      if (!isNotFound(err) && !(await removedMeanwhile(this.docker, record.id))) {
        clean = false;
        log.error({ err: describeCause(err) }, "undo: removing the pause container failed");
      }
    }
    try {
      if (clean) await this.dropRecord(record.id);
      else await this.saveRecord(record); // still "creating": the next start retries the undo
    } catch (err) {
      log.error({ err: describeCause(err) }, "undo: updating the checkpoint failed");
    }
  }

  // ---- Stop / Remove (teardown.ts) ----------------------------------------

  async stop(idOrPrefix: string): Promise<void> {
    const timer = new StepTimer("StopPodSandbox");
    const found = await this.resolveForCleanup(idOrPrefix, timer);
    if (!found) return;
    await this.withLock(found.id, async () => {
      await stopSandbox(this.teardown, found.id, this.records.get(found.id), timer);
      this.log.info({ sandboxId: found.id }, "pod sandbox stopped");
      timer.finish(this.log, { sandboxId: found.id });
    });
  }

  async remove(idOrPrefix: string): Promise<void> {
    const timer = new StepTimer("RemovePodSandbox");
    const found = await this.resolveForCleanup(idOrPrefix, timer);
    if (!found) return;
    await this.withLock(found.id, async () => {
      await removeSandbox(this.teardown, found.id, this.records.get(found.id), timer);
      this.log.info({ sandboxId: found.id }, "pod sandbox removed");
      timer.finish(this.log, { sandboxId: found.id });
    });
  }

  // ---- Status / List / view ------------------------------------------------

  /** The sandbox with this id or unique prefix, from Docker and the checkpoints; undefined if none. */
  async resolve(idOrPrefix: string): Promise<Resolved | undefined> {
    const prefix = validateId(idOrPrefix, "pod sandbox");
    return resolveSandboxPrefix(this.docker, this.records, prefix);
  }

  /** Stop/Remove are idempotent: an id that cannot exist (not hex) is simply not there. */
  private async resolveForCleanup(idOrPrefix: string, timer?: StepTimer): Promise<Resolved | undefined> {
    if (!idOrPrefix) throw invalidArgument("pod sandbox id is required");
    if (!/^[0-9a-f]{1,64}$/.test(idOrPrefix)) return undefined;
    // kubelet passes full ids: resolveSandboxPrefix knows a checkpointed one without asking dockerd (Stop/Remove use only the id).
    const t0 = performance.now();
    const found = await resolveSandboxPrefix(this.docker, this.records, idOrPrefix);
    if (!found?.unlisted) timer?.record("docker.list", performance.now() - t0);
    return found;
  }

  private async mustResolve(idOrPrefix: string): Promise<Resolved> {
    const found = await this.resolve(idOrPrefix);
    if (!found) throw notFound(`pod sandbox "${idOrPrefix}" not found`);
    return found;
  }

  async status(idOrPrefix: string): Promise<SandboxStatusInfo> {
    return sandboxStatus(this.docker, await this.mustResolve(idOrPrefix));
  }

  async list(filter: SandboxListFilter = {}): Promise<SandboxSummary[]> {
    return listSandboxes(this.docker, this.records, filter, this.options.rootDirectory);
  }

  async view(idOrPrefix: string): Promise<SandboxView> {
    return sandboxView(this.docker, await this.mustResolve(idOrPrefix));
  }

  /**
   * The pause container's Config.User under the Strict policy: user:group
   * (strict-user.ts), the group from the pause image's /etc/passwd when the
   * pod names none; the image is ensured first since it is read.
   */
  private async strictUser(spec: SandboxSpec, signal?: AbortSignal): Promise<string> {
    const fields = { runAsUser: spec.security.runAsUser, runAsGroup: spec.security.runAsGroup };
    if (fields.runAsUser !== undefined && fields.runAsGroup !== undefined) return `${fields.runAsUser}:${fields.runAsGroup}`;
    const image = await this.options.ensureImage(this.options.pauseImage, signal);
    const requested = requestedUser(fields, image.inspect?.Config?.User ?? undefined);
    let passwd;
    if (needsPasswd(requested)) {
      const text = await this.options.files.readText(image.id, "/etc/passwd");
      passwd = text === undefined ? undefined : parsePasswd(text);
    }
    return strictUserString(requested, passwd, this.options.pauseImage);
  }
}
