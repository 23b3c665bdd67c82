/**
 * A cache of `GET /containers/json` for the containers cridock manages,
 * kept honest by Docker's event stream. kubelet relists sandboxes and
 * containers every second; on a quiet node nothing changes in between, so
 * those relists need not cost dockerd a list call each (containerd and CRI-O
 * likewise answer lists from memory kept current by events).
 *
 * Correctness rules:
 * - The snapshot is used only while the event stream is connected; a
 *   reconnect, a change cridock cannot pin to one container (a create, a
 *   prune, a call by name) or age past `maxAgeMs` discards it.
 * - A change to one container (its event, or a call cridock makes on it by
 *   id) marks that container stale. A list refetches the stale ones alone
 *   (`fetchIds`) and patches the snapshot with them, instead of refetching
 *   the whole scope: deleting 110 pods is hundreds of events, and
 *   refetching and parsing every container after each was the top of
 *   cridock's own CPU profile there. Past `maxPatch` stale containers the
 *   snapshot is discarded, and the next list refetches the whole scope.
 * - A fetch, whole or of stale containers, is kept only for what did not
 *   change again while it ran: what did stays stale. Fetches overlap, and
 *   a whole fetch that ends after a newer one (whole or a patch) is not
 *   kept: its data is older.
 * - A list never answers from data older than a change made before it
 *   began: it shares a fetch under way only when nothing changed since
 *   that fetch began.
 * - Docker flushes the events response before it subscribes, so the stream is
 *   opened with `since` a little in the past: an event in that gap is
 *   replayed and marks its container stale.
 * Requests the cache cannot evaluate exactly, and id lookups without a
 * snapshot, go to dockerd unchanged.
 */
import type { ContainerSummary, DockerFilters } from "./types.ts";

export interface ListCacheOptions {
  /** Only requests filtering on this label are served (cridock's type label). */
  scopeLabel: string;
  /** Fetches every container carrying the scope label. */
  fetchScope: () => Promise<ContainerSummary[]>;
  /** Fetches those of these containers (full ids) that exist and carry the scope label. */
  fetchIds: (ids: string[]) => Promise<ContainerSummary[]>;
  /** A snapshot older than this is refetched whole even without events (safety net). */
  maxAgeMs?: number;
  /** Past this many stale containers a list refetches the whole scope. */
  maxPatch?: number;
}

interface Snapshot {
  /** The whole invalidation it belongs to: one from before the last is never used. */
  generation: number;
  /**
   * The latest change its data takes in: the seq at which the last fetch
   * applied to it (whole or a patch) began. A whole fetch begun before that
   * ends with older data and is not kept.
   */
  seq: number;
  /** When its whole fetch began (maxAgeMs counts from there). */
  at: number;
  /** In Docker's order: newest first. */
  items: ContainerSummary[];
}

/** A fetch under way: what it was asked at `seq`, the count of changes seen then. */
interface Flight<T> {
  generation: number;
  seq: number;
  result: Promise<T>;
}

export class ContainerListCache {
  /** Bumped by each discarding of the snapshot. */
  private generation = 0;
  /** Bumped by every change seen, to one container or to all. */
  private seq = 0;
  private connected = false;
  private snapshot: Snapshot | undefined;
  /** Containers changed since the snapshot's data of them was fetched: id → the seq of its last change. */
  private readonly stale = new Map<string, number>();
  private fetching: Flight<ContainerSummary[]> | undefined;
  private patching: Flight<ContainerSummary[] | undefined> | undefined;
  private readonly maxAgeMs: number;
  private readonly maxPatch: number;

  constructor(private readonly options: ListCacheOptions) {
    this.maxAgeMs = options.maxAgeMs ?? 10_000;
    this.maxPatch = options.maxPatch ?? 32;
  }

  /** Anything may have changed: the next list asks dockerd for the whole scope. */
  invalidate(): void {
    this.generation++;
    this.seq++;
    this.snapshot = undefined;
    this.stale.clear();
  }

  /** The container with this full id may have changed (or come or gone): the next list refetches it. */
  invalidateContainer(id: string): void {
    this.seq++;
    // Kept only for a snapshot that is or will be, and never more than a patch
    // takes: a node whose containers churn while nothing lists holds no ids.
    if (!this.snapshot && !this.fetching) return;
    if (this.stale.size >= this.maxPatch && !this.stale.has(id)) return this.invalidate();
    this.stale.set(id, this.seq);
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
    const snapshot = this.snapshot && Date.now() - this.snapshot.at <= this.maxAgeMs ? this.snapshot : undefined;
    let items: ContainerSummary[] | undefined;
    if (snapshot && this.stale.size === 0) {
      items = snapshot.items;
    } else if (snapshot) {
      // Undefined when the snapshot was discarded while the patch ran: dockerd answers.
      items = await this.patch();
      if (!items) return undefined;
    } else {
      // A lookup of one id after a change is cheaper asked of dockerd as it is
      // than by refetching every container; only broad lists refill the snapshot.
      if (filters.id?.length) return undefined;
      items = await this.fetch();
    }
    return items.filter(match);
  }

  /** The whole scope from dockerd: the fetch under way when nothing changed since it began, else a new one. */
  private fetch(): Promise<ContainerSummary[]> {
    if (this.fetching?.seq === this.seq) return this.fetching.result;
    const { generation, seq } = this;
    const at = Date.now();
    const result = this.options.fetchScope();
    const flight = { generation, seq, result };
    this.fetching = flight;
    const settled = () => {
      if (this.fetching === flight) this.fetching = undefined;
    };
    result.then((items) => {
      settled();
      if (generation !== this.generation || !this.connected) return;
      // Fetches overlap (one begun after a change does not wait for one begun before it): the older never replaces the newer.
      if (this.snapshot && this.snapshot.seq > seq) return;
      this.snapshot = { generation, seq, at, items };
      // What changed before the fetch began is in it; what changed since stays stale.
      for (const [id, changed] of this.stale) if (changed <= seq) this.stale.delete(id);
    }, settled);
    return result;
  }

  /**
   * The snapshot with every stale container refetched: the patch under way
   * when nothing changed since it began, else a new one of every container
   * stale now. Undefined when the snapshot it patched was discarded.
   */
  private patch(): Promise<ContainerSummary[] | undefined> {
    if (this.patching?.seq === this.seq) return this.patching.result;
    const { generation, seq } = this;
    const ids = [...this.stale.keys()];
    const result = this.options.fetchIds(ids).then((fetched) => {
      const snapshot = this.snapshot;
      if (!snapshot || snapshot.generation !== generation || !this.connected) return undefined;
      // Only what did not change again meanwhile: a later fetch may have applied newer data already.
      const current = new Set(ids.filter((id) => (this.stale.get(id) ?? Infinity) <= seq));
      const items = snapshot.items.filter((c) => !current.has(c.Id));
      for (const c of fetched) if (current.has(c.Id)) items.push(c);
      items.sort((a, b) => (b.Created ?? 0) - (a.Created ?? 0));
      for (const id of current) this.stale.delete(id);
      this.snapshot = { ...snapshot, seq: Math.max(snapshot.seq, seq), items };
      return items;
    });
    const flight = { generation, seq, result };
    this.patching = flight;
    const settled = () => {
      if (this.patching === flight) this.patching = undefined;
    };
    result.then(settled, settled);
    return result;
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
