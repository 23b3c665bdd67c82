/**
 * Pod-level container events for evented PLEG (GetContainerEvents), built
 * from Docker's container event stream.
 *
 * kubelet puts each event's pod status straight into its pod cache, so an
 * event carries the whole picture: the sandbox's status and the statuses of
 * all the sandbox's containers, read after the Docker event arrived, and
 * stamped with a time taken before the reads (kubelet keeps the newest
 * status by that stamp). Docker's create/start/die/destroy become
 * created/started/stopped/deleted, for pause containers (the sandbox) and
 * workload containers alike. A sandbox that is already gone is described
 * from the labels Docker attaches to its destroy event.
 *
 * Work and memory are bounded: nothing is built while nobody listens;
 * Docker events wait in one bounded queue and are built one at a time, in
 * order; each subscriber has a bounded queue of built events. A subscriber
 * that falls behind by more than its bound is ended with RESOURCE_EXHAUSTED
 * (kubelet reconnects, or relists) and never slows the others; if building
 * falls behind Docker, every subscriber is ended the same way.
 */
import type { ContainerEventStream, DockerContainerEvent } from "../docker/events.ts";
import { CridockError, describeCause } from "../errors.ts";
import type { Logger } from "../log.ts";
import { SANDBOX_ID_LABEL, TYPE_LABEL, TYPE_SANDBOX } from "./labels.ts";
import { describe } from "./sandbox/record.ts";
import type { SandboxStatusInfo } from "./sandbox/record.ts";
import type { ContainerInfo } from "./container/spec.ts";

export type PodEventType = "created" | "started" | "stopped" | "deleted";

export interface PodContainerEvent {
  containerId: string;
  type: PodEventType;
  /** Unix nanoseconds, taken before the statuses below were read. */
  createdAt: bigint;
  sandbox: SandboxStatusInfo;
  containers: ContainerInfo[];
}

export interface PodEventSources {
  events: Pick<ContainerEventStream, "subscribe">;
  /** PodSandboxStatus of a sandbox; rejects (NOT_FOUND) when it is gone. */
  sandboxStatus(id: string): Promise<SandboxStatusInfo>;
  /** ContainerStatus of every container of the sandbox. */
  containerStatuses(sandboxId: string): Promise<ContainerInfo[]>;
  log: Logger;
}

const ACTIONS: Record<string, PodEventType> = { create: "created", start: "started", die: "stopped", destroy: "deleted" };
/** Keys Docker adds to an event's attributes next to the container's labels. */
const NON_LABEL_ATTRIBUTES = new Set(["name", "image", "exitCode", "signal", "execDuration"]);

export const DEFAULT_SUBSCRIBER_QUEUE = 1024;
const MAX_PENDING_DOCKER_EVENTS = 8192;

export interface PodEventSubscription {
  /** The next event; undefined once closed. Rejects when the subscriber was ended for falling behind. */
  next(): Promise<PodContainerEvent | undefined>;
  close(): void;
}

class Subscriber implements PodEventSubscription {
  private readonly queue: PodContainerEvent[] = [];
  private waiter: { resolve: (e: PodContainerEvent | undefined) => void; reject: (err: unknown) => void } | undefined;
  private failure: unknown;
  closed = false;

  constructor(
    private readonly limit: number,
    private readonly onClose: (s: Subscriber) => void,
  ) {}

  push(event: PodContainerEvent): void {
    if (this.closed) return;
    if (this.waiter) {
      const { resolve } = this.waiter;
      this.waiter = undefined;
      resolve(event);
      return;
    }
    if (this.queue.length >= this.limit) {
      this.fail(new CridockError("RESOURCE_EXHAUSTED", `GetContainerEvents: the client fell more than ${this.limit} events behind; reconnect`));
      return;
    }
    this.queue.push(event);
  }

  fail(err: unknown): void {
    if (this.closed) return;
    this.failure = err;
    this.queue.length = 0;
    this.finish();
    if (this.waiter) {
      const { reject } = this.waiter;
      this.waiter = undefined;
      reject(err);
    }
  }

  next(): Promise<PodContainerEvent | undefined> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  close(): void {
    if (this.closed) return;
    this.finish();
    if (this.waiter) {
      const { resolve } = this.waiter;
      this.waiter = undefined;
      resolve(undefined);
    }
  }

  private finish(): void {
    this.closed = true;
    this.onClose(this);
  }

  get queued(): number {
    return this.queue.length;
  }
}

export class PodEventFeed {
  private readonly subscribers = new Set<Subscriber>();
  private readonly pending: DockerContainerEvent[] = [];
  private unsubscribe: (() => void) | undefined;
  private working = false;
  private readonly log: Logger;

  constructor(private readonly sources: PodEventSources) {
    this.log = sources.log.child({ component: "container-events" });
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  subscribe(limit = DEFAULT_SUBSCRIBER_QUEUE): PodEventSubscription {
    const subscriber = new Subscriber(limit, (s) => {
      this.subscribers.delete(s);
      if (this.subscribers.size === 0) this.stopListening();
    });
    this.subscribers.add(subscriber);
    if (!this.unsubscribe) this.unsubscribe = this.sources.events.subscribe((e) => this.enqueue(e));
    return subscriber;
  }

  /** Ends every subscription (cridock is stopping). */
  close(): void {
    for (const s of [...this.subscribers]) s.close();
  }

  private stopListening(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.pending.length = 0;
  }

  private enqueue(event: DockerContainerEvent): void {
    const type = ACTIONS[event.action];
    if (!type || !event.attributes[TYPE_LABEL]) return;
    if (this.pending.length >= MAX_PENDING_DOCKER_EVENTS) {
      const err = new CridockError("RESOURCE_EXHAUSTED", `GetContainerEvents: more than ${MAX_PENDING_DOCKER_EVENTS} Docker events wait to be described; reconnect`);
      this.log.warn({ pending: this.pending.length }, "container events fell behind Docker; ending the subscriptions");
      for (const s of [...this.subscribers]) s.fail(err);
      return;
    }
    this.pending.push(event);
    if (!this.working) void this.drain();
  }

  private async drain(): Promise<void> {
    this.working = true;
    try {
      let event: DockerContainerEvent | undefined;
      while ((event = this.pending.shift()) !== undefined) {
        if (this.subscribers.size === 0) break;
        const built = await this.build(event).catch((err: unknown) => {
          this.log.warn({ container: event!.id.slice(0, 12), action: event!.action, err: describeCause(err) }, "could not describe a container event");
          return undefined;
        });
        if (built) for (const s of [...this.subscribers]) s.push(built);
      }
    } finally {
      this.working = false;
    }
  }

  private async build(event: DockerContainerEvent): Promise<PodContainerEvent | undefined> {
    const type = ACTIONS[event.action]!;
    const isSandbox = event.attributes[TYPE_LABEL] === TYPE_SANDBOX;
    const sandboxId = isSandbox ? event.id : event.attributes[SANDBOX_ID_LABEL];
    if (!sandboxId) return undefined;
    const createdAt = BigInt(Date.now()) * 1_000_000n;
    let sandbox: SandboxStatusInfo;
    try {
      sandbox = await this.sources.sandboxStatus(sandboxId);
    } catch (err) {
      if (!(err instanceof CridockError && err.code === "NOT_FOUND") || !isSandbox) {
        if (err instanceof CridockError && err.code === "NOT_FOUND") return undefined; // its sandbox is gone too
        throw err;
      }
      sandbox = goneSandbox(event);
    }
    const containers = sandbox.info.containerState === "gone" ? [] : await this.sources.containerStatuses(sandboxId);
    return { containerId: event.id, type, createdAt, sandbox, containers };
  }
}

/** A removed sandbox, as far as its destroy event tells (labels and name). */
export function goneSandbox(event: DockerContainerEvent): SandboxStatusInfo {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(event.attributes)) if (!NON_LABEL_ATTRIBUTES.has(key)) labels[key] = value;
  const name = event.attributes.name ?? "";
  return {
    id: event.id,
    ...describe(undefined, { Names: [`/${name}`], Labels: labels }),
    ready: false,
    createdAt: event.timeNanos,
    ips: [],
    namespaces: { network: "pod", pid: "pod", ipc: "pod", targetId: "" },
    info: { containerState: "gone" },
  };
}
