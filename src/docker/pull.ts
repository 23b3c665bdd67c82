/**
 * Image pulls on the Engine API (`POST /images/create`), with the parts Docker
 * leaves to its clients:
 *
 * - credentials go in `X-Registry-Auth` (base64url JSON);
 * - a 200 answer is a progress stream in which a failure arrives as an
 *   `error`/`errorDetail` line; failures before the stream are HTTP 404/500
 *   whose status says little (a refused login is a 500), so both are
 *   classified by Docker's message and the message is kept;
 * - a watchdog aborts a pull that reports no progress for a while, without
 *   cutting short a long pull or extraction that still moves;
 * - aborting (caller signal or watchdog) closes the HTTP request, which makes
 *   dockerd cancel its pull.
 *
 * Plain types only: nothing here knows CRI.
 */
import { CridockError, type ErrorCode } from "../errors.ts";
import type { DockerClient } from "./client.ts";
import { DockerError } from "./errors.ts";
import { jsonLines } from "./stream.ts";
import type { ProgressMessage } from "./types.ts";

/** Registry credentials (Docker's AuthConfig fields, camelCase). */
export interface RegistryAuth {
  username?: string;
  password?: string;
  /** base64("username:password"), as in a docker config.json. */
  auth?: string;
  serverAddress?: string;
  identityToken?: string;
  registryToken?: string;
}

/**
 * The X-Registry-Auth header value, or undefined when there are no
 * credentials. Docker's daemon ignores the `auth` field, so it is decoded
 * into username/password here.
 */
export function encodeRegistryAuth(auth: RegistryAuth | undefined): string | undefined {
  if (!auth) return undefined;
  let { username, password } = auth;
  if (!username && auth.auth) {
    const decoded = Buffer.from(auth.auth, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon <= 0) throw new CridockError("INVALID_ARGUMENT", "auth.auth is not base64 of \"username:password\"");
    username = decoded.slice(0, colon);
    password = decoded.slice(colon + 1);
  }
  const body: Record<string, string> = {};
  if (username) body.username = username;
  if (password) body.password = password;
  if (auth.serverAddress) body.serveraddress = auth.serverAddress;
  if (auth.identityToken) body.identitytoken = auth.identityToken;
  if (auth.registryToken) body.registrytoken = auth.registryToken;
  if (Object.keys(body).length === 0) return undefined;
  // Go's base64.URLEncoding: the URL alphabet *with* "=" padding. Docker
  // silently ignores a header it cannot decode, and Node's "base64url" omits
  // the padding.
  return Buffer.from(JSON.stringify(body)).toString("base64").replace(/\+/g, "-").replace(/\//g, "_");
}

const NOT_FOUND = /manifest unknown|not found|name unknown|repository does not exist|no such image/i;
const UNAUTHENTICATED = /unauthorized|no basic auth credentials|authentication required|incorrect username or password|authorization failed/i;
const PERMISSION_DENIED = /denied|forbidden/i;
/** What a registry's refusal of missing or wrong credentials says, whatever precedes it. */
const CREDENTIALS_REFUSED = /no basic auth credentials|incorrect username or password/i;
const UNAVAILABLE = /connection refused|no such host|i\/o timeout|network is unreachable|TLS handshake timeout|server misbehaving|service unavailable/i;
const INVALID = /invalid reference format|invalid tag|invalid digest|repository name must/i;

/**
 * The gRPC-style code for a pull failure Docker described in `message`.
 * "pull access denied … does not exist or may require 'docker login'" is
 * Docker Hub's answer for both a missing and a private repository; it is
 * reported as NOT_FOUND because the image cannot be found with the
 * credentials given.
 */
export function classifyPullError(message: string, fallback: ErrorCode = "UNKNOWN"): ErrorCode {
  if (INVALID.test(message)) return "INVALID_ARGUMENT";
  // The containerd image store says why after the ambiguous phrase ("… may require authorization: authorization failed: no basic auth credentials").
  if (CREDENTIALS_REFUSED.test(message)) return "UNAUTHENTICATED";
  if (/pull access denied/i.test(message) && /does not exist/i.test(message)) return "NOT_FOUND";
  if (UNAUTHENTICATED.test(message)) return "UNAUTHENTICATED";
  if (PERMISSION_DENIED.test(message)) return "PERMISSION_DENIED";
  if (NOT_FOUND.test(message)) return "NOT_FOUND";
  if (UNAVAILABLE.test(message)) return "UNAVAILABLE";
  return fallback;
}

/** What a pull has done so far, summed over layers. */
export interface PullSnapshot {
  layersTotal: number;
  layersDone: number;
  bytesDone: number;
  bytesTotal: number;
  /** The last status line Docker sent (e.g. "Extracting"). */
  lastStatus: string;
}

interface LayerState {
  status: string;
  current: number;
  total: number;
  /** Bytes extracted so far (Docker reports them while extracting). */
  extracted: number;
  done: boolean;
}

const LAYER_DONE = /^(Pull complete|Already exists)$/;

/** Folds progress lines into per-layer state. */
export class PullProgress {
  private readonly layers = new Map<string, LayerState>();
  private lastStatus = "";

  /** Applies one line; true if it changed anything (i.e. it is progress). */
  apply(message: ProgressMessage): boolean {
    const status = message.status ?? "";
    const id = message.id;
    // Lines without an id, or with the tag as id ("Pulling from x", id "1"), describe the whole pull.
    if (!id || status.startsWith("Pulling from")) {
      const changed = status !== this.lastStatus;
      this.lastStatus = status || this.lastStatus;
      return changed;
    }
    const previous = this.layers.get(id);
    const layer: LayerState = previous ? { ...previous } : { status: "", current: 0, total: 0, extracted: 0, done: false };
    layer.status = status;
    const detail = message.progressDetail;
    if (status === "Downloading" && detail) {
      layer.current = detail.current ?? layer.current;
      layer.total = detail.total ?? layer.total;
    } else if (status === "Download complete" || status === "Verifying Checksum") {
      if (layer.total > 0) layer.current = layer.total;
    } else if (status === "Extracting" && detail) {
      // Extraction reports its own byte counts: progress, but not downloaded bytes.
      layer.extracted = detail.current ?? layer.extracted;
    }
    if (LAYER_DONE.test(status)) {
      layer.done = true;
      if (layer.total > 0) layer.current = layer.total;
    }
    const changed =
      !previous ||
      previous.status !== layer.status ||
      previous.current !== layer.current ||
      previous.extracted !== layer.extracted ||
      previous.done !== layer.done;
    this.layers.set(id, layer);
    this.lastStatus = status;
    return changed;
  }

  snapshot(): PullSnapshot {
    let layersDone = 0;
    let bytesDone = 0;
    let bytesTotal = 0;
    for (const layer of this.layers.values()) {
      if (layer.done) layersDone++;
      bytesDone += layer.current;
      bytesTotal += layer.total;
    }
    return { layersTotal: this.layers.size, layersDone, bytesDone, bytesTotal, lastStatus: this.lastStatus };
  }
}

export interface PullOptions {
  /** Repository as Docker's `fromImage` takes it. */
  fromImage: string;
  /** Tag or digest. */
  tag: string;
  auth?: RegistryAuth;
  signal?: AbortSignal;
  /** Abort when no progress line arrives for this long; 0 disables. */
  progressDeadlineMs: number;
  /** Called after every line that made progress. */
  onProgress?: (snapshot: PullSnapshot) => void;
  /** For messages: the reference the user asked for. */
  displayName?: string;
}

/**
 * Pulls and resolves when Docker reports the pull finished. Throws a
 * CridockError whose code fits Docker's complaint, DEADLINE_EXCEEDED for a
 * stalled pull, or the caller's abort reason.
 */
export async function pullImage(docker: DockerClient, options: PullOptions): Promise<PullSnapshot> {
  const name = options.displayName ?? `${options.fromImage}:${options.tag}`;
  const registryAuth = encodeRegistryAuth(options.auth);
  const watchdog = new Watchdog(options.progressDeadlineMs, () =>
    new CridockError(
      "DEADLINE_EXCEEDED",
      `pull of ${name} was aborted: no progress for ${formatMs(options.progressDeadlineMs)} (--image-pull-progress-deadline)`,
    ),
  );
  const signal = options.signal ? AbortSignal.any([options.signal, watchdog.signal]) : watchdog.signal;
  const progress = new PullProgress();
  let body: { destroy(): unknown; destroyed?: boolean } | undefined;
  try {
    const response = await docker.raw("POST", "/images/create", {
      query: { fromImage: options.fromImage, tag: options.tag },
      headers: registryAuth ? { "x-registry-auth": registryAuth } : {},
      signal,
      timeoutMs: 0,
    });
    body = response.body;
    for await (const message of jsonLines<ProgressMessage>(response.body)) {
      if (message.error || message.errorDetail) {
        const text = message.errorDetail?.message || message.error || "unknown error";
        throw new CridockError(classifyPullError(text), `pull of ${name} failed: ${text}`);
      }
      if (progress.apply(message)) {
        watchdog.reset();
        options.onProgress?.(progress.snapshot());
      }
    }
    return progress.snapshot();
  } catch (err) {
    throw pullFailure(err, name, signal);
  } finally {
    watchdog.stop();
    if (body && !body.destroyed) body.destroy();
  }
}

function pullFailure(err: unknown, name: string, signal: AbortSignal): CridockError {
  if (signal.aborted && signal.reason instanceof CridockError) return signal.reason;
  if (err instanceof DockerError) {
    const code = classifyPullError(err.dockerMessage, err.code);
    return new CridockError(code, `pull of ${name} failed: ${err.dockerMessage || `HTTP ${err.statusCode}`}`);
  }
  if (err instanceof CridockError) return err;
  if (signal.aborted) return new CridockError("CANCELLED", `pull of ${name} was cancelled`, { cause: signal.reason });
  return new CridockError("UNKNOWN", `pull of ${name} failed`, { cause: err });
}

/** Aborts its signal when reset() is not called for `ms` milliseconds. */
class Watchdog {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    private readonly reason: () => Error,
  ) {
    this.reset();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  reset(): void {
    if (this.ms <= 0 || this.controller.signal.aborted) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.controller.abort(this.reason()), this.ms);
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
