/**
 * The image domain on dockerd: status, list, pull, remove, and the two helpers
 * the sandbox and container code use (resolveImage, ensureImage).
 *
 * Docker is the source of truth; the only state kept here is a cache of each
 * image id's USER (immutable per id), because ListImages' summaries lack the
 * image config and one inspect per image per list would be too slow.
 */
import type { DockerClient } from "../../docker/client.ts";
import { isNotFound } from "../../docker/errors.ts";
import { pullImage, type PullSnapshot, type RegistryAuth } from "../../docker/pull.ts";
import type { ImageInspect } from "../../docker/types.ts";
import { CridockError, invalidArgument, notFound, withContext } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { SharedPulls } from "./shared-pulls.ts";
import {
  lookupKey,
  normalizedString,
  parseImageReference,
  pullParameters,
  type ImageReference,
  type NamedReference,
} from "./reference.ts";
import {
  PinnedImages,
  imageConfigInfo,
  parseImageUser,
  recordFromInspect,
  recordFromSummary,
  type ImageRecord,
  type ImageUser,
} from "./records.ts";

export type { ImageRecord } from "./records.ts";
export type { RegistryAuth } from "../../docker/pull.ts";

/** An image found in dockerd. */
export interface ResolvedImage {
  /** Docker's image id, `sha256:<hex>`. */
  id: string;
  inspect: ImageInspect;
}

export interface ImageStatus {
  record: ImageRecord;
  /** The image config, for verbose status. */
  info: Record<string, unknown>;
}

export interface ImageManagerOptions {
  docker: DockerClient;
  log: Logger;
  /** The pause image (--pod-infra-container-image): reported as pinned. */
  pauseImage: string;
  /** --image-pull-progress-deadline; 0 disables the watchdog. */
  pullProgressDeadlineMs: number;
  /** How often a running pull logs its progress at info level. */
  progressLogIntervalMs?: number;
  /** Told of every pull from a registry when it ends (bytes: downloaded as dockerd reported); for metrics. */
  onPull?: (seconds: number, result: { ok: true; bytes: number } | { ok: false }) => void;
}

export interface PullOptions {
  auth?: RegistryAuth;
  signal?: AbortSignal;
}

/** Inspections at once when ListImages fills the USER cache. */
const INSPECT_CONCURRENCY = 8;
/** How often RemoveImage re-checks that an image is gone before giving up. */
const REMOVE_CONFIRM_ATTEMPTS = 20;
const REMOVE_CONFIRM_INTERVAL_MS = 50;

export class ImageManager {
  private readonly docker: DockerClient;
  private readonly log: Logger;
  private readonly pinned: PinnedImages;
  private readonly pullProgressDeadlineMs: number;
  private readonly progressLogIntervalMs: number;
  private readonly onPull: ImageManagerOptions["onPull"];
  private readonly users = new Map<string, ImageUser>();
  private readonly removals = new Map<string, Promise<void>>();
  private readonly pulls = new SharedPulls<string>();

  constructor(options: ImageManagerOptions) {
    this.docker = options.docker;
    this.log = options.log.child({ component: "images" });
    this.pinned = new PinnedImages([options.pauseImage]);
    this.pullProgressDeadlineMs = options.pullProgressDeadlineMs;
    this.progressLogIntervalMs = options.progressLogIntervalMs ?? 5_000;
    this.onPull = options.onPull;
  }

  /**
   * The image `reference` names (tag, digest or id), or NOT_FOUND with
   * "image X is not present; pull it first". NOT_FOUND rather than
   * FAILED_PRECONDITION because that is what containerd answers to a
   * CreateContainer whose image is missing, and kubelet treats both alike.
   * INVALID_ARGUMENT for a malformed reference.
   */
  async resolveImage(reference: string): Promise<ResolvedImage> {
    const ref = parseImageReference(reference);
    const inspect = await this.inspect(ref);
    if (!inspect) throw notFound(`image ${reference} is not present; pull it first`);
    return { id: inspect.Id, inspect };
  }

  /** resolveImage, pulling the image first when it is absent (progress is logged). */
  async ensureImage(reference: string, options: PullOptions = {}): Promise<ResolvedImage> {
    const ref = parseImageReference(reference);
    const existing = await this.inspect(ref);
    if (existing) return { id: existing.Id, inspect: existing };
    this.log.info({ image: reference }, "image is not present; pulling it");
    await this.pull(reference, options);
    return this.resolveImage(reference);
  }

  /** The image's record and config, or undefined when no image matches. */
  async status(reference: string): Promise<ImageStatus | undefined> {
    const inspect = await this.inspect(parseImageReference(reference));
    if (!inspect) return undefined;
    this.users.set(inspect.Id, parseImageUser(inspect.Config?.User));
    return { record: recordFromInspect(inspect, this.pinned), info: imageConfigInfo(inspect) };
  }

  /** All images, or only the one `reference` names (none if it is absent). */
  async list(reference?: string): Promise<ImageRecord[]> {
    if (reference) {
      const found = await this.status(reference);
      return found ? [found.record] : [];
    }
    const summaries = await this.docker.listImages();
    const ids = new Set(summaries.map((s) => s.Id));
    for (const id of this.users.keys()) if (!ids.has(id)) this.users.delete(id);
    const unknown = summaries.filter((s) => !this.users.has(s.Id)).map((s) => s.Id);
    const vanished = await this.learnUsers(unknown);
    return summaries
      .filter((s) => !vanished.has(s.Id))
      .map((s) => recordFromSummary(s, this.users.get(s.Id) ?? { username: "" }, this.pinned));
  }

  /** Pulls `reference` and returns the pulled image's id (`sha256:…`). */
  async pull(reference: string, options: PullOptions = {}): Promise<string> {
    const ref = parseImageReference(reference);
    if (ref.kind === "id") {
      const inspect = await this.inspect(ref);
      if (inspect) return inspect.Id;
      throw invalidArgument(`cannot pull ${reference}: an image id names no registry; pull by name, tag or digest`);
    }
    const image = normalizedString(ref);
    // Same image, same credentials: one pull, however many callers ask at once.
    const key = `${image}\n${options.auth ? JSON.stringify(options.auth) : ""}`;
    return this.pulls.run(key, options.signal, (signal) => this.pullNow(ref, image, reference, { auth: options.auth, signal }));
  }

  private async pullNow(ref: NamedReference, image: string, reference: string, options: PullOptions): Promise<string> {
    const { fromImage, tag } = pullParameters(ref);
    const started = Date.now();
    this.log.info({ image }, "pulling image");
    let lastLog = started;
    const onProgress = (snapshot: PullSnapshot) => {
      const now = Date.now();
      if (now - lastLog < this.progressLogIntervalMs) return;
      lastLog = now;
      this.log.info({ image, ...progressFields(snapshot), elapsedMs: now - started }, "pull progress");
    };
    let snapshot: PullSnapshot;
    try {
      snapshot = await pullImage(this.docker, {
        fromImage,
        tag,
        auth: options.auth,
        signal: options.signal,
        progressDeadlineMs: this.pullProgressDeadlineMs,
        onProgress,
        displayName: reference,
      });
    } catch (err) {
      this.log.info({ image, elapsedMs: Date.now() - started, err }, "pull failed");
      this.onPull?.((Date.now() - started) / 1000, { ok: false });
      throw err;
    }
    this.onPull?.((Date.now() - started) / 1000, { ok: true, bytes: snapshot.bytesDone });
    const inspect = await this.inspect(ref, options.signal);
    if (!inspect) {
      throw new CridockError("UNKNOWN", `dockerd reported the pull of ${reference} complete, but the image is not present`);
    }
    this.users.set(inspect.Id, parseImageUser(inspect.Config?.User));
    this.log.info({ image, id: inspect.Id, ...progressFields(snapshot), elapsedMs: Date.now() - started }, "pulled image");
    return inspect.Id;
  }

  /**
   * Removes the image `reference` names with all its tags. OK when it is
   * already gone; returns once dockerd no longer has it. Concurrent removals
   * of one image share a single Docker call.
   */
  async remove(reference: string): Promise<void> {
    const inspect = await this.inspect(parseImageReference(reference));
    if (!inspect) return;
    const id = inspect.Id;
    let removal = this.removals.get(id);
    if (!removal) {
      removal = this.removeById(id, reference).finally(() => this.removals.delete(id));
      this.removals.set(id, removal);
    }
    await removal;
  }

  private async removeById(id: string, reference: string): Promise<void> {
    try {
      // force: an image with several repositories is otherwise a 409.
      await this.docker.removeImage(id, true);
    } catch (err) {
      if (!isNotFound(err)) throw withContext(`cannot remove image ${reference} (${id})`, err, "UNKNOWN");
    }
    for (let attempt = 0; attempt < REMOVE_CONFIRM_ATTEMPTS; attempt++) {
      if (!(await this.inspect({ kind: "id", original: id, id, prefix: false }))) {
        this.users.delete(id);
        this.log.info({ image: reference, id }, "removed image");
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, REMOVE_CONFIRM_INTERVAL_MS));
    }
    throw new CridockError("UNKNOWN", `image ${reference} (${id}) is still present after dockerd removed it`);
  }

  /** Docker's inspect of the image `ref` names; undefined when there is none. */
  private async inspect(ref: ImageReference, signal?: AbortSignal): Promise<ImageInspect | undefined> {
    try {
      signal?.throwIfAborted();
      return await this.docker.inspectImage(lookupKey(ref));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (signal?.aborted && signal.reason instanceof CridockError) throw signal.reason;
      throw withContext(`cannot inspect image ${ref.original}`, err, "UNKNOWN");
    }
  }

  /** Inspects images whose USER is not cached yet; returns the ids that vanished meanwhile. */
  private async learnUsers(ids: string[]): Promise<Set<string>> {
    const vanished = new Set<string>();
    let next = 0;
    const worker = async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const inspect = await this.inspect({ kind: "id", original: id, id, prefix: false });
        if (inspect) this.users.set(id, parseImageUser(inspect.Config?.User));
        else vanished.add(id);
      }
    };
    await Promise.all(Array.from({ length: Math.min(INSPECT_CONCURRENCY, ids.length) }, worker));
    return vanished;
  }
}

function progressFields(snapshot: PullSnapshot) {
  return {
    layersDone: snapshot.layersDone,
    layersTotal: snapshot.layersTotal,
    bytesDone: snapshot.bytesDone,
    bytesTotal: snapshot.bytesTotal,
    status: snapshot.lastStatus,
  };
}
