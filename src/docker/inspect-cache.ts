/**
 * Docker's inspect of a container, kept between calls while Docker's event
 * stream shows the container unchanged. kubelet asks ContainerStatus of every
 * running container each time its log manager looks at the logs (every 10 s
 * by default) and inspects through the stats calls as often; on a quiet node
 * of 110 pods those inspects were most of cridock's steady CPU, each one an
 * HTTP request to dockerd and a parse of its answer. containerd and CRI-O
 * answer the same calls from memory.
 *
 * Correctness rules (as for the list cache, list-cache.ts):
 * - Entries are used only while the event stream is connected; a connection
 *   change drops them all.
 * - Any event for a container, and any request cridock makes that may change
 *   it (`refreshes`), drops its entry. Every change ContainerStatus and the
 *   stats report comes with a followed event (start, die, oom, update,
 *   rename, health_status, …) or is cridock's own request.
 * - An answer is kept only if nothing was invalidated while it was fetched,
 *   so a fetch that raced a change never outlives it.
 * - Entries older than `maxAgeMs` are fetched again: the safety net for an
 *   event lost in the stream's reconnect window.
 * Cached answers are frozen: every caller gets the same object.
 */
import type { ContainerInspect } from "./types.ts";

export interface InspectCacheOptions {
  fetch: (id: string) => Promise<ContainerInspect>;
  maxAgeMs?: number;
  /** Above this many entries the cache starts over (ids of containers long gone). */
  maxEntries?: number;
}

export class ContainerInspectCache {
  private readonly entries = new Map<string, { at: number; value: ContainerInspect }>();
  private readonly fetching = new Map<string, { generation: number; value: Promise<ContainerInspect> }>();
  private generation = 0;
  private connected = false;
  private readonly maxAgeMs: number;
  private readonly maxEntries: number;

  constructor(private readonly options: InspectCacheOptions) {
    this.maxAgeMs = options.maxAgeMs ?? 30_000;
    this.maxEntries = options.maxEntries ?? 4096;
  }

  /** The event stream came up or went down: nothing kept can be trusted. */
  setConnected(connected: boolean): void {
    this.connected = connected;
    this.invalidateAll();
  }

  /** Any container may have changed. */
  invalidateAll(): void {
    this.generation++;
    this.entries.clear();
  }

  /** The container `id` (a full id) may have changed. */
  invalidate(id: string): void {
    this.generation++;
    this.entries.delete(id);
  }

  /** The inspect of the container with this full id: kept, shared with a fetch under way, or fetched. */
  async inspect(id: string): Promise<ContainerInspect> {
    if (!this.connected) return this.options.fetch(id);
    const kept = this.entries.get(id);
    if (kept && Date.now() - kept.at <= this.maxAgeMs) return kept.value;
    const generation = this.generation;
    const flight = this.fetching.get(id);
    if (flight?.generation === generation) return flight.value;
    const at = Date.now();
    const value = this.options.fetch(id).then(deepFreeze);
    const mine = { generation, value };
    this.fetching.set(id, mine);
    try {
      const inspect = await value;
      if (generation === this.generation && this.connected) {
        if (this.entries.size >= this.maxEntries) this.entries.clear();
        this.entries.set(id, { at, value: inspect });
      }
      return inspect;
    } finally {
      if (this.fetching.get(id) === mine) this.fetching.delete(id);
    }
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
