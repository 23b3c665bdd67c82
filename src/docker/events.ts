/**
 * Follows Docker's container event stream (`GET /events`) for as long as
 * cridock runs, reconnecting after dockerd restarts, and hands each event to
 * its subscribers: the container list cache (which only needs to know that
 * something changed) and evented PLEG (GetContainerEvents).
 *
 * Its connection state doubles as dockerd's liveness: while the stream is
 * up, dockerd is up, so Version and Status can answer from memory. `epoch`
 * counts reconnects, so whoever caches something about the daemon (its
 * version) knows when a restarted daemon may have changed it.
 *
 * Subscribers are called synchronously and must not block; one that needs to
 * do work queues it itself (see runtime/container-events.ts). A throwing
 * subscriber is logged and kept, and never stops the others.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../log.ts";
import { jsonLines } from "./stream.ts";

/** One container event as Docker reports it, without CRI meaning. */
export interface DockerContainerEvent {
  /** Full container id. */
  id: string;
  /** Docker's action: create, start, die, stop, destroy, kill, oom, exec_start: …, health_status: … */
  action: string;
  /** When it happened, in Unix nanoseconds. */
  timeNanos: bigint;
  /** The container's labels and name, as Docker attaches them. */
  attributes: Record<string, string>;
}

/**
 * The actions asked of dockerd: those that change what a container list
 * shows (the list cache) or that evented PLEG and the log followers read
 * (create, start, die, destroy). Left out are exec_create/exec_start/
 * exec_die, attach, resize, top and the like: kubelet's exec probes and
 * every ExecSync make three exec events each, and parsing them, waking the
 * subscribers and dropping the list cache for nothing was a share of every
 * ExecSync's CPU. Docker matches health_status also with its ": healthy"
 * suffix.
 */
export const FOLLOWED_ACTIONS = ["create", "start", "restart", "die", "kill", "oom", "stop", "destroy", "rename", "pause", "unpause", "update", "health_status"];

export type ContainerEventListener = (event: DockerContainerEvent) => void;
export type ConnectionListener = (connected: boolean) => void;

/** Opens the events response (ndjson), with the filters and since given. */
export type OpenEvents = (query: Record<string, string | number>, signal: AbortSignal) => Promise<AsyncIterable<Buffer | Uint8Array>>;

interface RawEvent {
  Type?: string;
  Action?: string;
  status?: string;
  id?: string;
  time?: number;
  timeNano?: number;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

export function parseContainerEvent(raw: unknown): DockerContainerEvent | undefined {
  const e = raw as RawEvent;
  if (!e || typeof e !== "object" || (e.Type !== undefined && e.Type !== "container")) return undefined;
  const id = e.Actor?.ID ?? e.id;
  const action = e.Action ?? e.status;
  if (typeof id !== "string" || typeof action !== "string" || !/^[0-9a-f]{64}$/.test(id)) return undefined;
  // timeNano is beyond 2^53 and so imprecise as a JSON number; seconds are exact.
  const seconds = typeof e.time === "number" ? BigInt(Math.trunc(e.time)) : 0n;
  const nano = typeof e.timeNano === "number" ? BigInt(Math.trunc(e.timeNano)) : 0n;
  const timeNanos = nano / 1_000_000_000n === seconds ? nano : seconds * 1_000_000_000n;
  return { id, action, timeNanos, attributes: { ...(e.Actor?.Attributes ?? {}) } };
}

export class ContainerEventStream {
  private readonly listeners = new Set<ContainerEventListener>();
  private readonly connectionListeners = new Set<ConnectionListener>();
  private control: AbortController | undefined;
  private connectedNow = false;
  private epochNow = 0;

  constructor(
    private readonly open: OpenEvents,
    private readonly log: Logger,
  ) {}

  get connected(): boolean {
    return this.connectedNow;
  }

  /** Incremented on every (re)connection of the stream. */
  get epoch(): number {
    return this.epochNow;
  }

  /** Adds a listener; the returned function removes it. */
  subscribe(listener: ContainerEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onConnection(listener: ConnectionListener): () => void {
    this.connectionListeners.add(listener);
    return () => this.connectionListeners.delete(listener);
  }

  start(): void {
    if (this.control) return;
    const control = new AbortController();
    this.control = control;
    void this.follow(control.signal);
  }

  stop(): void {
    this.control?.abort();
  }

  private setConnected(connected: boolean): void {
    if (connected) this.epochNow++;
    this.connectedNow = connected;
    for (const listener of this.connectionListeners) {
      try {
        listener(connected);
      } catch (err) {
        this.log.error({ err }, "a container event connection listener failed");
      }
    }
  }

  /**
   * Tells the subscribers of a change dockerd made without an event of its
   * own. A failed start ends a container's attempt (it stays "created" with
   * an exit code) and Docker announces nothing, while kubelet's evented PLEG
   * learns that a container stopped only from an event.
   */
  announce(event: DockerContainerEvent): void {
    this.emit(event);
  }

  private emit(event: DockerContainerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.log.error({ err, action: event.action }, "a container event listener failed");
      }
    }
  }

  private async follow(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // Docker answers before it subscribes; replaying from just before the
      // request covers anything that happened in between.
      const since = Math.floor(Date.now() / 1000) - 2;
      try {
        const body = await this.open({ since, filters: JSON.stringify({ type: ["container"], event: FOLLOWED_ACTIONS }) }, signal);
        this.setConnected(true);
        this.log.debug("following container events");
        for await (const raw of jsonLines(body)) {
          const event = parseContainerEvent(raw);
          if (event) this.emit(event);
        }
      } catch (err) {
        if (!signal.aborted) this.log.debug({ err }, "container event stream failed; retrying");
      }
      if (this.connectedNow) this.setConnected(false);
      await sleep(1000, undefined, { signal }).catch(() => undefined);
    }
  }
}
