/**
 * Pod sandboxes, dockershim-style: a pause container holding the pod's
 * namespaces, its network set up by the pod network layer against a
 * persistent netns handle, its state checkpointed so every step can be
 * finished or undone after a crash. Operations on one sandbox are serialized
 * (KeyedMutex); different sandboxes proceed in parallel.
 */
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { isConflict, isNotFound } from "../../docker/errors.ts";
import type { ContainerInspect } from "../../docker/types.ts";
import { CridockError, describeCause, failedPrecondition, invalidArgument, notFound } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { PodNetwork, PodNetworkRequest } from "../../network/plugin.ts";
import { pinNetns, unpinNetns } from "../../network/netns.ts";
import type { CheckpointStore } from "../../store/checkpoint.ts";
import { KeyedMutex } from "../keyed-mutex.ts";
import { SANDBOX_ID_LABEL, TYPE_CONTAINER, TYPE_LABEL, TYPE_SANDBOX } from "../labels.ts";
import { validateId } from "../lookup.ts";
import { randomizedName, sandboxName } from "../naming.ts";
import { hostCapabilities, privilegedStartFailure } from "../container/capabilities.ts";
import { sandboxCreateBody } from "./docker.ts";
import { dockerBridgeIps, listSandboxes, sandboxStatus, sandboxView, type ResolvedSandbox } from "./queries.ts";
import {
  dockerTimeToNanos,
  type SandboxListFilter,
  type SandboxRecord,
  type SandboxStatusInfo,
  type SandboxSummary,
} from "./record.ts";
import { bandwidthFromAnnotations, validateSandboxSpec, type SandboxSpec } from "./spec.ts";
import type { SandboxLookup, SandboxView } from "./view.ts";

export interface SandboxManagerOptions {
  docker: DockerClient;
  network: PodNetwork;
  store: CheckpointStore<SandboxRecord>;
  log: Logger;
  pauseImage: string;
  /** Pulls the image when absent, logging progress (ImageManager.ensureImage). */
  ensureImage: (reference: string, signal?: AbortSignal) => Promise<unknown>;
  rootDirectory: string;
  logMaxSize: string;
  logMaxFile: number;
  cgroupDriver: () => Promise<"systemd" | "cgroupfs">;
  /** Docker runtime names (docker info .Runtimes). */
  runtimeNames: () => Promise<string[]>;
}

const PAUSE_STOP_GRACE_SECONDS = 10;

type Resolved = ResolvedSandbox;

export class SandboxManager implements SandboxLookup {
  private readonly docker: DockerClient;
  private readonly network: PodNetwork;
  private readonly store: CheckpointStore<SandboxRecord>;
  private readonly log: Logger;
  private readonly locks = new KeyedMutex();
  /** Checkpoints, mirrored in memory: the store is written through, read only at start. */
  readonly records = new Map<string, SandboxRecord>();

  constructor(private readonly options: SandboxManagerOptions) {
    this.docker = options.docker;
    this.network = options.network;
    this.store = options.store;
    this.log = options.log.child({ component: "sandboxes" });
  }

  netnsPathOf(id: string): string {
    return join(this.options.rootDirectory, "netns", id);
  }

  /** Serializes `fn` with every other operation on sandbox `id`. */
  withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.run(id, fn);
  }

  async saveRecord(record: SandboxRecord): Promise<void> {
    await this.store.write(record.id, record);
    this.records.set(record.id, record);
  }

  async dropRecord(id: string): Promise<void> {
    await this.store.remove(id);
    this.records.delete(id);
  }

  // ---- RunPodSandbox -------------------------------------------------------

  async run(spec: SandboxSpec, signal?: AbortSignal): Promise<string> {
    validateSandboxSpec(spec);
    const hostNetwork = spec.namespaces.network === "node";
    const bandwidth = bandwidthFromAnnotations(spec.annotations);
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
    const log = this.log.child({ pod, attempt: spec.metadata.attempt });
    const fail = (step: string, err: unknown) =>
      new CridockError(err instanceof CridockError ? err.code : "UNKNOWN", `RunPodSandbox for pod ${pod}: ${step}`, { cause: err });

    try {
      await this.options.ensureImage(this.options.pauseImage, signal);
    } catch (err) {
      throw fail(`ensuring the pause image ${this.options.pauseImage}`, err);
    }
    let body;
    try {
      body = await sandboxCreateBody(spec, {
        image: this.options.pauseImage,
        cgroupDriver: await this.options.cgroupDriver(),
        networkKind: this.network.kind,
        rootDirectory: this.options.rootDirectory,
        logMaxSize: this.options.logMaxSize,
        logMaxFile: this.options.logMaxFile,
      });
    } catch (err) {
      if (err instanceof CridockError && err.code === "INVALID_ARGUMENT") throw err;
      throw fail("building the pause container configuration", err);
    }
    let id: string;
    try {
      id = await this.createContainer(sandboxName(spec.metadata, spec.metadata.attempt), body);
    } catch (err) {
      throw fail("creating the pause container", err);
    }

    return await this.withLock(id, async () => {
      const record: SandboxRecord = {
        id,
        spec,
        createdAt: "0",
        phase: "creating",
        hostNetwork,
        networkKind: this.network.kind,
        netnsPath: "",
        network: { phase: "none", name: "", ips: [], result: null },
      };
      let step = "writing the sandbox checkpoint";
      try {
        await this.saveRecord(record);
        step = "starting the pause container";
        await this.docker.startContainer(id);
        const inspect = await this.docker.inspectContainer(id);
        record.createdAt = dockerTimeToNanos(inspect.Created).toString();
        if (!inspect.State.Running) throw new Error(`the pause container exited at once (exit code ${inspect.State.ExitCode}) ${inspect.State.Error}`);
        if (!hostNetwork && this.network.kind === "cni") {
          step = "pinning the network namespace";
          const netnsPath = this.netnsPathOf(id);
          record.netnsPath = netnsPath;
          await this.saveRecord(record);
          await pinNetns(inspect.State.Pid, netnsPath);
          step = "setting up the pod network";
          record.network.phase = "attaching";
          await this.saveRecord(record);
          const attachment = await this.network.setUp(this.networkRequest(record, bandwidth), signal);
          record.network = { phase: "attached", name: attachment.networkName, ips: attachment.ips, result: attachment.result };
          if (attachment.ips.length === 0) throw new Error(`network ${attachment.networkName} returned no IP address for the pod`);
        } else if (!hostNetwork) {
          const ips = dockerBridgeIps(inspect);
          record.network = { phase: "attached", name: "docker-bridge", ips, result: inspect.NetworkSettings };
          if (ips.length === 0) throw new Error("Docker gave the pause container no IP address");
        }
        step = "writing the sandbox checkpoint";
        record.phase = "ready";
        await this.saveRecord(record);
        log.info({ sandboxId: id, ips: record.network.ips }, "pod sandbox is ready");
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

  private networkRequest(record: SandboxRecord, bandwidth = bandwidthFromAnnotationsSafe(record.spec.annotations)): PodNetworkRequest {
    const { spec } = record;
    return {
      sandboxId: record.id,
      pod: { name: spec.metadata.name, namespace: spec.metadata.namespace, uid: spec.metadata.uid },
      netnsPath: record.netnsPath,
      portMappings: spec.portMappings,
      bandwidth,
      dns: spec.dns,
    };
  }

  /** Creates the pause container; a stale one of the same name is removed, a live one makes us pick another name. */
  private async createContainer(name: string, body: Parameters<DockerClient["createContainer"]>[1]): Promise<string> {
    try {
      return (await this.docker.createContainer(name, body)).Id;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    let existing: ContainerInspect | undefined;
    try {
      existing = await this.docker.inspectContainer(name);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (existing && !existing.State.Running && !this.records.has(existing.Id)) {
      this.log.info({ name, containerId: existing.Id }, "removing a stale container that holds the sandbox name");
      await this.docker.removeContainer(existing.Id, { force: true }).catch(() => undefined);
      try {
        return (await this.docker.createContainer(name, body)).Id;
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    }
    return (await this.docker.createContainer(randomizedName(name), body)).Id;
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
        if (record.networkKind === "cni") await this.network.tearDown(this.networkRequest(record, bandwidth));
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
      if (!isNotFound(err)) {
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

  // ---- Stop / Remove -------------------------------------------------------

  async stop(idOrPrefix: string): Promise<void> {
    const found = await this.resolveForCleanup(idOrPrefix);
    if (!found) return;
    await this.withLock(found.id, async () => {
      const record = this.records.get(found.id);
      await this.forEachContainer(found.id, "stop", (id) => this.docker.json("POST", `/containers/${id}/stop`, { timeoutMs: 0 }));
      if (record) await this.detachNetwork(record);
      try {
        await this.docker.stopContainer(found.id, PAUSE_STOP_GRACE_SECONDS);
      } catch (err) {
        if (!isNotFound(err)) throw new CridockError(codeOf(err), `StopPodSandbox ${found.id}: stopping the pause container`, { cause: err });
      }
      if (record && record.phase !== "stopped") await this.saveRecord({ ...record, phase: "stopped" });
      this.log.info({ sandboxId: found.id }, "pod sandbox stopped");
    });
  }

  async remove(idOrPrefix: string): Promise<void> {
    const found = await this.resolveForCleanup(idOrPrefix);
    if (!found) return;
    await this.withLock(found.id, async () => {
      const record = this.records.get(found.id);
      await this.forEachContainer(found.id, "remove", (id) => this.docker.removeContainer(id, { force: true, volumes: true }));
      if (record) await this.detachNetwork(record);
      try {
        await this.docker.removeContainer(found.id, { force: true, volumes: true });
      } catch (err) {
        if (!isNotFound(err)) throw new CridockError(codeOf(err), `RemovePodSandbox ${found.id}: removing the pause container`, { cause: err });
      }
      if (record) {
        await unpinNetns(record.netnsPath);
        await this.dropRecord(found.id);
      }
      this.log.info({ sandboxId: found.id }, "pod sandbox removed");
    });
  }

  /** CNI DEL exactly once: the detached phase is persisted, so later calls skip it. */
  private async detachNetwork(record: SandboxRecord): Promise<void> {
    if (record.network.phase !== "attaching" && record.network.phase !== "attached") return;
    if (record.networkKind === "cni") {
      try {
        await this.network.tearDown(this.networkRequest(record));
      } catch (err) {
        throw new CridockError(codeOf(err), `pod sandbox ${record.id}: tearing down the pod network`, { cause: err });
      }
    }
    const updated: SandboxRecord = { ...record, network: { ...record.network, phase: "detached" } };
    await this.saveRecord(updated);
  }

  private async forEachContainer(sandboxId: string, what: string, fn: (id: string) => Promise<unknown>): Promise<void> {
    const containers = await this.docker.listContainers({
      label: [`${TYPE_LABEL}=${TYPE_CONTAINER}`, `${SANDBOX_ID_LABEL}=${sandboxId}`],
    });
    const targets = what === "stop" ? containers.filter((c) => c.State === "running" || c.State === "paused" || c.State === "restarting") : containers;
    const results = await Promise.allSettled(targets.map((c) => fn(c.Id)));
    const failed = results.flatMap((r, i) => (r.status === "rejected" && !isNotFound(r.reason) ? [`${targets[i]!.Id.slice(0, 12)}: ${describeCause(r.reason)}`] : []));
    if (failed.length) throw new CridockError("UNKNOWN", `pod sandbox ${sandboxId}: could not ${what} its containers: ${failed.join("; ")}`);
  }

  // ---- Status / List / view ------------------------------------------------

  /** The sandbox with this id or unique prefix, from Docker and the checkpoints; undefined if none. */
  async resolve(idOrPrefix: string): Promise<Resolved | undefined> {
    const prefix = validateId(idOrPrefix, "pod sandbox");
    return this.resolvePrefix(prefix);
  }

  /** Stop/Remove are idempotent: an id that cannot exist (not hex) is simply not there. */
  private async resolveForCleanup(idOrPrefix: string): Promise<Resolved | undefined> {
    if (!idOrPrefix) throw invalidArgument("pod sandbox id is required");
    if (!/^[0-9a-f]{1,64}$/.test(idOrPrefix)) return undefined;
    return this.resolvePrefix(idOrPrefix);
  }

  private async resolvePrefix(prefix: string): Promise<Resolved | undefined> {
    const containers = (await this.docker.listContainers({ label: [`${TYPE_LABEL}=${TYPE_SANDBOX}`], id: [prefix] })).filter((c) =>
      c.Id.startsWith(prefix),
    );
    const ids = new Set(containers.map((c) => c.Id));
    for (const id of this.records.keys()) if (id.startsWith(prefix)) ids.add(id);
    if (ids.size === 0) return undefined;
    let id: string;
    if (ids.has(prefix)) id = prefix;
    else if (ids.size === 1) id = [...ids][0]!;
    else throw invalidArgument(`pod sandbox id prefix "${prefix}" is ambiguous: it matches ${ids.size} sandboxes`);
    return { id, container: containers.find((c) => c.Id === id), record: this.records.get(id) };
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
    return listSandboxes(this.docker, this.records, filter);
  }

  async view(idOrPrefix: string): Promise<SandboxView> {
    return sandboxView(this.docker, await this.mustResolve(idOrPrefix));
  }
}

function codeOf(err: unknown): CridockError["code"] {
  return err instanceof CridockError ? err.code : "UNKNOWN";
}

function bandwidthFromAnnotationsSafe(annotations: Record<string, string>) {
  try {
    return bandwidthFromAnnotations(annotations);
  } catch {
    return undefined;
  }
}

