/**
 * A cache of `GET /containers/json` for the containers cridock manages,
 * kept honest by Docker's event stream. kubelet relists sandboxes and
 * containers every second; on a quiet node nothing changes in between, so
 * those relists need not cost dockerd a list call each (containerd and CRI-O
 * likewise answer lists from memory kept current by events).
 *
 * Correctness rules:
 * - The snapshot is used only while the event stream is connected; any
 *   container event, any mutating call cridock makes, a reconnect, or age
 *   past `maxAgeMs` discards it.
 * - A snapshot is kept only if nothing invalidated it while it was fetched.
 * - Lists that arrive while a fetch is under way share it only when nothing
 *   invalidated the cache since that fetch began (during a pod burst Docker's
 *   events invalidate it many times a second, and every list used to refetch
 *   the whole scope on its own).
 * - Docker flushes the events response before it subscribes, so the stream is
 *   opened with `since` a little in the past: an event in that gap is
 *   replayed and invalidates the snapshot.
 * Requests the cache cannot evaluate exactly, and id lookups that miss, go
 * to dockerd unchanged.
 */
import type { ContainerSummary, DockerFilters } from "./types.ts";

export interface ListCacheOptions {
  /** Only requests filtering on this label are served (cridock's type label). */
  scopeLabel: string;
  /** Fetches every container carrying the scope label. */
  fetchScope: () => Promise<ContainerSummary[]>;
  /** A snapshot older than this is refetched even without events (safety net). */
  maxAgeMs?: number;
}

export class ContainerListCache {
  private generation = 0;
  private connected = false;
  private snapshot: { generation: number; at: number; items: ContainerSummary[] } | undefined;
  private fetching: { generation: number; at: number; items: Promise<ContainerSummary[]> } | undefined;
  private readonly maxAgeMs: number;

  constructor(private readonly options: ListCacheOptions) {
    this.maxAgeMs = options.maxAgeMs ?? 10_000;
  }

  /** Something may have changed: the next list asks dockerd. */
  invalidate(): void {
    this.generation++;
    this.snapshot = undefined;
  }

  /** The event stream came up or went down; either way the snapshot is suspect. */
  setConnected(connected: boolean): void {
    this.connected = connected;
    this.invalidate();
  }

  get isConnected(): boolean {
    return this.connected;
  }

  /**
   * The containers matching `filters` (all states), or undefined when the
   * cache cannot answer this request and the caller should ask dockerd.
   */
  async list(filters: DockerFilters): Promise<ContainerSummary[] | undefined> {
    const match = compileFilters(filters, this.options.scopeLabel);
    if (!match || !this.connected) return undefined;
    const fresh = this.snapshot && Date.now() - this.snapshot.at <= this.maxAgeMs ? this.snapshot : undefined;
    let items = fresh?.items;
    if (!items) {
      // A lookup of one id after a change is cheaper asked of dockerd as it is
      // than by refetching every container; only broad lists refill the snapshot.
      if (filters.id?.length) return undefined;
      items = await this.fetch();
    }
    return items.filter(match);
  }

  /** The whole scope from dockerd: the fetch under way when nothing changed since it began, else a new one. */
  private fetch(): Promise<ContainerSummary[]> {
    const generation = this.generation;
    if (this.fetching?.generation === generation) return this.fetching.items;
    const at = Date.now();
    const items = this.options.fetchScope();
    const flight = { generation, at, items };
    this.fetching = flight;
    const settled = () => {
      if (this.fetching === flight) this.fetching = undefined;
    };
    items.then((list) => {
      settled();
      if (generation === this.generation && this.connected) this.snapshot = { generation, at, items: list };
    }, settled);
    return items;
  }
}

/**
 * A predicate equal to Docker's own filtering for the filters cridock uses
 * (`label`: "key" or "key=value", all must hold; `id`: Docker matches it
 * as a pattern inside the id, which for hex strings is a substring), or
 * undefined for anything else or a request outside the cache's scope.
 */
export function compileFilters(
  filters: DockerFilters,
  scopeLabel: string,
): ((c: ContainerSummary) => boolean) | undefined {
  const keys = Object.keys(filters);
  if (keys.some((k) => k !== "label" && k !== "id")) return undefined;
  const labels = (filters.label ?? []).map((l) => {
    const eq = l.indexOf("=");
    return eq < 0 ? { key: l, value: undefined } : { key: l.slice(0, eq), value: l.slice(eq + 1) };
  });
  if (!labels.some((l) => l.key === scopeLabel)) return undefined;
  const ids = filters.id ?? [];
  if (ids.some((id) => !/^[0-9a-f]*$/.test(id))) return undefined;
  return (c) => {
    const have = c.Labels ?? {};
    for (const { key, value } of labels) {
      if (!(key in have)) return false;
      if (value !== undefined && have[key] !== value) return false;
    }
    return ids.length === 0 || ids.some((id) => c.Id.includes(id));
  };
}
