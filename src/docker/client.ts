/**
 * Docker Engine API client: undici over the daemon's unix socket.
 *
 * - Negotiates the API version once per connection epoch (the lower of the
 *   daemon's and ours, at least 1.41) and again after dockerd went away,
 *   because a restarted daemon may be a different version.
 * - Every request has a deadline (--runtime-request-timeout) unless it is a
 *   long-lived stream, and honours the caller's AbortSignal.
 * - Failures become DockerError (HTTP status kept) or UNAVAILABLE when the
 *   socket does not answer, so callers never see raw undici errors.
 * - Requests that hold their connection for long (log follows, the event
 *   stream, waits, stops with a grace period, pulls, hijacked exec/attach)
 *   use a pool of their own. On one shared, bounded pool, thirty followed
 *   logs plus thirty pod deletions each stopping for their grace period
 *   filled every connection, and quick calls (/version, /_ping, inspects)
 *   queued behind them until kubelet gave up on them.
 */
import { Pool, UndiciError, poolRequest, poolUpgrade } from "./undici-pool.ts";
import type { Duplex, Readable } from "node:stream";
import { ContainerInspectCache } from "./inspect-cache.ts";
import { ContainerListCache } from "./list-cache.ts";
import { ContainerEventStream } from "./events.ts";

import { CridockError } from "../errors.ts";
import { MAX_API_VERSION, MIN_API_VERSION, compareApiVersions } from "./api-version.ts";
import { DockerError, errorMessageOf } from "./errors.ts";
import { failureOutcome, type DockerRequestObserver } from "./observer.ts";
export type { DockerRequestObserver, DockerRequestOutcome } from "./observer.ts";
export type { Query, RawResponse, RequestOptions } from "./request.ts";
export { socketPathOf } from "./request.ts";
import { encodeQuery, socketPathOf, type RawResponse, type RequestOptions } from "./request.ts";
import type { Logger } from "../log.ts";
import type {
  CheckpointCreateBody,
  ContainerChange,
  ContainerPathStat,
  ContainerCreateBody,
  ContainerCreateResponse,
  ContainerInspect,
  ContainerSummary,
  DockerFilters,
  DockerInfo,
  DockerVersion,
  ExecCreateBody,
  ExecInspect,
  ImageDeleteItem,
  ImageInspect,
  ImageSummary,
  Resources,
  WaitResponse,
} from "./types.ts";

export interface DockerClientOptions {
  /** `unix:///var/run/docker.sock` or a bare socket path. */
  endpoint: string;
  /** Default deadline of a request, in milliseconds; 0 means none. */
  requestTimeoutMs: number;
  logger: Logger;
  /** Concurrent connections to dockerd for quick requests (long-held ones have their own pool). */
  connections?: number;
  /**
   * Serve container lists that filter on this label from a snapshot kept
   * current by Docker's event stream (see list-cache.ts); started by
   * watchContainerEvents().
   */
  listCacheScopeLabel?: string;
  /** Told of every request once dockerd answered (headers) or it failed; for metrics. */
  onRequest?: DockerRequestObserver;
}


const CONNECTION_ERRORS = new Set(["ECONNREFUSED", "ENOENT", "ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);

export class DockerClient {
  readonly socketPath: string;
  private readonly pool: Pool;
  /** For requests that hold a connection for long; unbounded, as each belongs to a container or a call. */
  private readonly longPool: Pool;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private negotiated: Promise<string> | undefined;
  private readonly listCache: ContainerListCache | undefined;
  private readonly inspectCache: ContainerInspectCache | undefined;
  private readonly onRequest: DockerRequestObserver | undefined;
  /** Docker's container events, followed once watchContainerEvents() is called. */
  readonly events: ContainerEventStream;

  constructor(options: DockerClientOptions) {
    this.socketPath = socketPathOf(options.endpoint);
    this.timeoutMs = options.requestTimeoutMs;
    this.log = options.logger.child({ component: "docker" });
    this.onRequest = options.onRequest;
    this.pool = new Pool("http://docker", {
      socketPath: this.socketPath,
      connections: options.connections ?? 64,
      keepAliveTimeout: 30_000,
      // Deadlines are ours (AbortSignal); undici's own would cut off streams.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.longPool = new Pool("http://docker", {
      socketPath: this.socketPath,
      connections: null,
      keepAliveTimeout: 30_000,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.events = new ContainerEventStream(
      async (query, signal) => (await this.raw("GET", "/events", { query, timeoutMs: 0, signal })).body,
      this.log,
    );
    const scopeLabel = options.listCacheScopeLabel;
    if (scopeLabel) {
      this.listCache = new ContainerListCache({
        scopeLabel,
        fetchScope: () => this.listContainersFromDocker({ label: [scopeLabel] }),
      });
      this.inspectCache = new ContainerInspectCache({ fetch: (id) => this.inspectContainer(id) });
    }
  }

  /** The API version in use, negotiating it first if needed. */
  apiVersion(): Promise<string> {
    if (!this.negotiated) {
      const attempt = this.negotiate();
      this.negotiated = attempt;
      attempt.catch(() => {
        if (this.negotiated === attempt) this.negotiated = undefined;
      });
    }
    return this.negotiated;
  }

  private async negotiate(): Promise<string> {
    const version = await this.json<DockerVersion>("GET", "/version", { unversioned: true });
    const server = version.ApiVersion;
    if (compareApiVersions(server, MIN_API_VERSION) < 0) {
      throw new CridockError(
        "FAILED_PRECONDITION",
        `dockerd ${version.Version} speaks Engine API ${server}; cridock needs ${MIN_API_VERSION} or newer`,
      );
    }
    const chosen = compareApiVersions(server, MAX_API_VERSION) < 0 ? server : MAX_API_VERSION;
    this.log.info({ dockerVersion: version.Version, serverApi: server, api: chosen }, "negotiated Docker API version");
    return chosen;
  }

  /**
   * Connections open to dockerd now: `quick` in the bounded pool, `long` in
   * the pool of long-held requests. Hijacked exec and attach streams have
   * left the pool and are not counted. For metrics: under pod churn both
   * return to their idle level once keep-alive closes what is unused.
   */
  connectionCounts(): { quick: number; long: number } {
    return { quick: this.pool.stats.connected, long: this.longPool.stats.connected };
  }

  async close(): Promise<void> {
    this.events.stop();
    await Promise.all([this.pool.close(), this.longPool.close()]);
  }

  /**
   * Follows Docker's container events, reconnecting after dockerd restarts;
   * they keep the container list cache honest and feed GetContainerEvents.
   */
  watchContainerEvents(): void {
    const cache = this.listCache;
    if (cache) {
      this.events.onConnection((connected) => cache.setConnected(connected));
      this.events.subscribe(() => cache.invalidate());
    }
    const inspects = this.inspectCache;
    if (inspects) {
      this.events.onConnection((connected) => inspects.setConnected(connected));
      this.events.subscribe((event) => inspects.invalidate(event.id));
    }
    this.events.start();
  }

  private async path(path: string, options: RequestOptions): Promise<string> {
    const prefix = options.unversioned ? "" : `/v${await this.apiVersion()}`;
    const query = options.query ? encodeQuery(options.query) : "";
    return `${prefix}${path}${query}`;
  }

  private signal(options: RequestOptions): AbortSignal | undefined {
    const timeout = options.timeoutMs ?? this.timeoutMs;
    const signals: AbortSignal[] = [];
    if (options.signal) signals.push(options.signal);
    if (timeout > 0) signals.push(AbortSignal.timeout(timeout));
    if (signals.length === 0) return undefined;
    return signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  }

  private encodeBody(options: RequestOptions): { body?: unknown; headers: Record<string, string> } {
    const headers = { ...options.headers };
    const body = options.body;
    if (body === undefined) return { headers };
    if (Buffer.isBuffer(body) || typeof (body as Readable).pipe === "function") return { body, headers };
    headers["content-type"] ??= "application/json";
    return { body: JSON.stringify(body), headers };
  }

  /** A request whose body the caller consumes; error statuses are thrown. */
  async raw(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse> {
    const what = `docker ${method} ${path}`;
    const signal = this.signal(options);
    // A change cridock makes is seen by its very next list, event or not.
    const mutates = method !== "GET" && path.startsWith("/containers/");
    if (mutates) this.invalidateCaches(path);
    const started = performance.now();
    try {
      const { body, headers } = this.encodeBody(options);
      const long = options.long || options.timeoutMs === 0;
      const response = await poolRequest(long ? this.longPool : this.pool, {
        method: method as "GET",
        path: await this.path(path, options),
        headers,
        body: body as string | undefined,
        signal,
      });
      if (response.statusCode >= 400) {
        const text = await response.body.text().catch(() => "");
        throw new DockerError(response.statusCode, errorMessageOf(text), what);
      }
      this.onRequest?.(method, path, (performance.now() - started) / 1000, { statusCode: response.statusCode });
      return response as unknown as RawResponse;
    } catch (err) {
      const translated = this.translate(err, what, options, signal);
      this.onRequest?.(method, path, (performance.now() - started) / 1000, failureOutcome(translated));
      throw translated;
    } finally {
      if (mutates) this.invalidateCaches(path);
    }
  }

  /** A request that may change containers is under way or done: what the caches hold of them may be stale. */
  private invalidateCaches(path: string): void {
    this.listCache?.invalidate();
    if (!this.inspectCache) return;
    // /containers/{id}/…: that container; /containers/create, /containers/prune, a name: any of them.
    const target = decodeURIComponent(path.split("/")[2] ?? "");
    if (/^[0-9a-f]{64}$/.test(target)) this.inspectCache.invalidate(target);
    else this.inspectCache.invalidateAll();
  }

  /** A request with a JSON answer (or none, for 204). */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.raw(method, path, options);
    try {
      const text = await response.body.text();
      return (text ? JSON.parse(text) : undefined) as T;
    } catch (err) {
      throw this.translate(err, `docker ${method} ${path}`, options);
    }
  }

  /**
   * A hijacked connection (exec start, attach): Docker answers 101 and the
   * socket then carries the process's stdio.
   */
  async hijack(path: string, options: RequestOptions = {}): Promise<Duplex> {
    const what = `docker POST ${path} (hijack)`;
    const signal = this.signal({ ...options, timeoutMs: options.timeoutMs ?? this.timeoutMs });
    const started = performance.now();
    try {
      const { body, headers } = this.encodeBody(options);
      const { socket } = await poolUpgrade(this.longPool, {
        method: "POST",
        path: await this.path(path, options),
        protocol: "tcp",
        headers,
        body: body as string | undefined,
        signal,
      });
      this.onRequest?.("POST", path, (performance.now() - started) / 1000, { statusCode: 101 });
      return socket;
    } catch (err) {
      const translated = this.translate(err, what, options, signal);
      this.onRequest?.("POST", path, (performance.now() - started) / 1000, failureOutcome(translated));
      throw translated;
    }
  }

  private translate(err: unknown, what: string, options: RequestOptions, signal?: AbortSignal): unknown {
    if (err instanceof CridockError) return err;
    if (options.signal?.aborted) {
      const reason = options.signal.reason;
      if (reason instanceof CridockError) return reason;
      return new CridockError("CANCELLED", `${what}: cancelled by the caller`, { cause: reason });
    }
    if (signal?.aborted) {
      const timeout = options.timeoutMs ?? this.timeoutMs;
      return new CridockError("DEADLINE_EXCEEDED", `${what}: dockerd did not answer within ${timeout} ms`);
    }
    if (err instanceof UndiciError && /upgrade/i.test(err.message)) {
      return new CridockError("UNKNOWN", `${what}: dockerd did not upgrade the connection`, { cause: err });
    }
    const code = (err as { code?: string }).code;
    if (code && CONNECTION_ERRORS.has(code)) {
      this.negotiated = undefined;
      return new CridockError("UNAVAILABLE", `${what}: dockerd is not reachable at ${this.socketPath}`, { cause: err });
    }
    return new CridockError("UNKNOWN", what, { cause: err });
  }

  // ---- typed endpoints -------------------------------------------------

  ping(signal?: AbortSignal): Promise<string> {
    return this.raw("GET", "/_ping", { unversioned: true, signal, timeoutMs: 5_000 }).then((r) => r.body.text());
  }

  version(): Promise<DockerVersion> {
    return this.json<DockerVersion>("GET", "/version");
  }

  info(): Promise<DockerInfo> {
    return this.json<DockerInfo>("GET", "/info");
  }

  /** Containers in every state matching `filters`; from the list cache when it can answer. */
  async listContainers(filters: DockerFilters = {}): Promise<ContainerSummary[]> {
    return (await this.listCache?.list(filters)) ?? this.listContainersFromDocker(filters);
  }

  private listContainersFromDocker(filters: DockerFilters): Promise<ContainerSummary[]> {
    return this.json<ContainerSummary[]>("GET", "/containers/json", {
      query: { all: true, filters: JSON.stringify(filters) },
    });
  }

  /**
   * The inspect of a container by full id, from memory while Docker's events
   * show it unchanged (inspect-cache.ts): for the calls kubelet repeats on
   * every container (ContainerStatus, stats). The answer is frozen. Any other
   * id, or a client without the caches, asks dockerd.
   */
  inspectContainerCached(id: string): Promise<ContainerInspect> {
    return this.inspectCache && /^[0-9a-f]{64}$/.test(id) ? this.inspectCache.inspect(id) : this.inspectContainer(id);
  }

  inspectContainer(id: string, size = false): Promise<ContainerInspect> {
    return this.json<ContainerInspect>("GET", `/containers/${encodeURIComponent(id)}/json`, {
      query: size ? { size: true } : undefined,
    });
  }

  createContainer(name: string, body: ContainerCreateBody): Promise<ContainerCreateResponse> {
    return this.json<ContainerCreateResponse>("POST", "/containers/create", { query: { name }, body });
  }

  /**
   * Starts a created container; with `checkpoint`, CRIU restores it from
   * that checkpoint of its own directory (experimental daemons only), which
   * may take as long as a dump: no quick deadline then.
   */
  async startContainer(id: string, options: { checkpoint?: string } = {}): Promise<void> {
    const query = options.checkpoint ? { checkpoint: options.checkpoint } : undefined;
    await this.json("POST", `/containers/${encodeURIComponent(id)}/start`, { query, long: Boolean(options.checkpoint) });
  }

  /** Stops with a grace period of `seconds`; the HTTP deadline covers it. */
  async stopContainer(id: string, seconds: number, signal?: string): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/stop`, {
      query: { t: seconds, signal },
      timeoutMs: this.timeoutMs > 0 ? this.timeoutMs + seconds * 1000 : 0,
      long: true,
    });
  }

  /** Freezes every process of the container (the cgroup freezer, through runc). */
  async pauseContainer(id: string): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/pause`);
  }

  async unpauseContainer(id: string): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/unpause`);
  }

  async killContainer(id: string, signal = "KILL"): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/kill`, { query: { signal } });
  }

  async removeContainer(id: string, options: { force?: boolean; volumes?: boolean } = {}): Promise<void> {
    await this.json("DELETE", `/containers/${encodeURIComponent(id)}`, {
      query: { force: options.force ?? false, v: options.volumes ?? false },
    });
  }

  /**
   * A tar stream of `path` in the container's filesystem (a created
   * container will do); `timeoutMs` 0 for a transfer that may take long.
   */
  async containerArchive(id: string, path: string, signal?: AbortSignal, timeoutMs?: number): Promise<RawResponse> {
    return this.raw("GET", `/containers/${encodeURIComponent(id)}/archive`, { query: { path }, signal, timeoutMs });
  }

  /** Extracts the tar `body` at `path` in the container's filesystem (a created container will do). */
  async putContainerArchive(id: string, path: string, body: Readable, signal?: AbortSignal): Promise<void> {
    await this.json("PUT", `/containers/${encodeURIComponent(id)}/archive`, {
      query: { path },
      body,
      headers: { "content-type": "application/x-tar" },
      timeoutMs: 0,
      signal,
    });
  }

  /** Whether `path` exists in the container's filesystem (HEAD: dockerd answers 404 when not). */
  async containerPathExists(id: string, path: string): Promise<boolean> {
    try {
      const response = await this.raw("HEAD", `/containers/${encodeURIComponent(id)}/archive`, { query: { path } });
      await response.body.dump().catch(() => undefined);
      return true;
    } catch (err) {
      if (err instanceof DockerError && err.statusCode === 404) return false;
      throw err;
    }
  }

  /**
   * Stat of `path` in the container's filesystem (HEAD answers with it in a
   * header); undefined when there is no such path.
   */
  async containerPathStat(id: string, path: string, signal?: AbortSignal): Promise<ContainerPathStat | undefined> {
    let response: RawResponse;
    try {
      response = await this.raw("HEAD", `/containers/${encodeURIComponent(id)}/archive`, { query: { path }, signal });
    } catch (err) {
      if (err instanceof DockerError && err.statusCode === 404) return undefined;
      throw err;
    }
    await response.body.dump().catch(() => undefined);
    const header = response.headers["x-docker-container-path-stat"];
    const text = Array.isArray(header) ? header[0] : header;
    if (!text) return undefined;
    return JSON.parse(Buffer.from(text, "base64").toString("utf8")) as ContainerPathStat;
  }

  /** What changed in the container's root filesystem against its image (`docker diff`). */
  async containerChanges(id: string, signal?: AbortSignal): Promise<ContainerChange[]> {
    return (await this.json<ContainerChange[] | null>("GET", `/containers/${encodeURIComponent(id)}/changes`, { signal })) ?? [];
  }

  /**
   * CRIU dumps the container's processes into CheckpointDir/CheckpointID
   * (experimental daemons only: others answer 501). Docker does not stop the
   * dump when the request is cancelled, so the deadline is the caller's
   * signal, not the default one, which a large container's dump outlasts.
   */
  async createCheckpoint(id: string, body: CheckpointCreateBody, signal?: AbortSignal): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/checkpoints`, { body, signal, timeoutMs: 0 });
  }

  waitContainer(id: string, condition: "not-running" | "next-exit" | "removed" = "not-running", signal?: AbortSignal) {
    return this.json<WaitResponse>("POST", `/containers/${encodeURIComponent(id)}/wait`, {
      query: { condition },
      timeoutMs: 0,
      signal,
    });
  }

  async updateContainer(id: string, resources: Resources): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/update`, { body: resources });
  }

  async resizeContainerTty(id: string, height: number, width: number): Promise<void> {
    await this.json("POST", `/containers/${encodeURIComponent(id)}/resize`, { query: { h: height, w: width } });
  }

  listImages(filters: DockerFilters = {}): Promise<ImageSummary[]> {
    return this.json<ImageSummary[]>("GET", "/images/json", { query: { filters: JSON.stringify(filters) } });
  }

  inspectImage(reference: string): Promise<ImageInspect> {
    return this.json<ImageInspect>("GET", `/images/${encodeURIComponent(reference)}/json`);
  }

  removeImage(reference: string, force = true): Promise<ImageDeleteItem[]> {
    return this.json<ImageDeleteItem[]>("DELETE", `/images/${encodeURIComponent(reference)}`, {
      query: { force, noprune: false },
    });
  }

  execCreate(containerId: string, body: ExecCreateBody): Promise<{ Id: string }> {
    return this.json<{ Id: string }>("POST", `/containers/${encodeURIComponent(containerId)}/exec`, { body });
  }

  /** Starts an exec and returns the hijacked stdio connection. */
  execStart(execId: string, options: { tty: boolean; signal?: AbortSignal }): Promise<Duplex> {
    return this.hijack(`/exec/${encodeURIComponent(execId)}/start`, {
      body: { Detach: false, Tty: options.tty },
      signal: options.signal,
    });
  }

  execInspect(execId: string): Promise<ExecInspect> {
    return this.json<ExecInspect>("GET", `/exec/${encodeURIComponent(execId)}/json`);
  }

  async execResize(execId: string, height: number, width: number): Promise<void> {
    await this.json("POST", `/exec/${encodeURIComponent(execId)}/resize`, { query: { h: height, w: width } });
  }
}
