/**
 * Files of an image, read without running it: a scratch container is
 * created from the image (never started), its filesystem read through the
 * archive endpoint, and the container removed. Docker has no endpoint that
 * reads a file of an image itself, and exporting the image would copy all
 * of it.
 *
 * Used for what CreateContainer must know before it creates: the image's
 * /etc/passwd (the primary group of a uid, for the Strict supplemental
 * groups policy) and whether an image volume's sub-path exists. An image id
 * names immutable content, so answers are cached per image id.
 */
import type { Readable } from "node:stream";
import type { DockerClient } from "../docker/client.ts";
import type { ContainerCreateBody } from "../docker/types.ts";
import { CRIDOCK_PREFIX } from "./labels.ts";
import { withContext } from "../errors.ts";
import type { Logger } from "../log.ts";

/** Marks scratch containers, so a leftover of a crash can be recognised and removed. */
export const SCRATCH_LABEL = `${CRIDOCK_PREFIX}scratch`;
/** An account file larger than this is refused rather than read into memory. */
const MAX_FILE_BYTES = 1 << 20;
/** Image ids whose answers are kept; a node runs far fewer distinct images. */
const CACHE_LIMIT = 256;

export interface ImageFileReader {
  /** The text of a regular file in the image, undefined when there is none at `path`. */
  readText(imageId: string, path: string): Promise<string | undefined>;
  /** Whether `path` exists in the image (any type). */
  exists(imageId: string, path: string): Promise<boolean>;
}

export interface ImageTreeReader {
  /**
   * Docker's tar of each of `paths` that exists in the image, handed to
   * `use` one after another (not cached: for copying trees out, such as a
   * checkpoint image's). A transfer may take long: only `signal` ends it.
   */
  archives(imageId: string, paths: readonly string[], use: (tar: Readable) => Promise<void>, signal?: AbortSignal): Promise<void>;
}

export class DockerImageFiles implements ImageFileReader, ImageTreeReader {
  private readonly cache = new Map<string, Promise<string | boolean | undefined>>();

  constructor(
    private readonly docker: DockerClient,
    private readonly log: Logger,
  ) {}

  readText(imageId: string, path: string): Promise<string | undefined> {
    return this.cached(`${imageId}\0text\0${path}`, () => this.withScratch(imageId, (id) => this.fileOf(id, path))) as Promise<
      string | undefined
    >;
  }

  exists(imageId: string, path: string): Promise<boolean> {
    return this.cached(`${imageId}\0exists\0${path}`, () =>
      this.withScratch(imageId, (id) => this.docker.containerPathExists(id, path)),
    ) as Promise<boolean>;
  }

  archives(imageId: string, paths: readonly string[], use: (tar: Readable) => Promise<void>, signal?: AbortSignal): Promise<void> {
    return this.withScratch(imageId, async (id) => {
      for (const path of paths) {
        const tar = await this.archiveOf(id, path, { signal, timeoutMs: 0 });
        if (tar) await use(tar);
      }
    });
  }

  /** Removes scratch containers a crash left behind (called at start-up). */
  async removeLeftovers(): Promise<number> {
    const left = await this.docker.listContainers({ label: [SCRATCH_LABEL] });
    for (const c of left) await this.docker.removeContainer(c.Id, { force: true }).catch(() => undefined);
    return left.length;
  }

  private cached<T extends string | boolean | undefined>(key: string, read: () => Promise<T>): Promise<T> {
    const hit = this.cache.get(key);
    if (hit) return hit as Promise<T>;
    const value = read();
    this.cache.set(key, value);
    // A failure is not an answer: the next call asks again.
    value.catch(() => this.cache.delete(key));
    if (this.cache.size > CACHE_LIMIT) this.cache.delete(this.cache.keys().next().value!);
    return value;
  }

  private async withScratch<T>(imageId: string, use: (containerId: string) => Promise<T>): Promise<T> {
    const body: ContainerCreateBody = {
      Image: imageId,
      // Never started; the entrypoint only satisfies images that have neither ENTRYPOINT nor CMD.
      Entrypoint: ["/cridock-scratch-never-runs"],
      Labels: { [SCRATCH_LABEL]: "1" },
      HostConfig: { NetworkMode: "none" },
    };
    let id: string;
    try {
      id = (await this.docker.createContainer("", body)).Id;
    } catch (err) {
      throw withContext(`reading image ${imageId}: creating a scratch container`, err, "UNKNOWN");
    }
    try {
      return await use(id);
    } catch (err) {
      throw withContext(`reading image ${imageId}`, err, "UNKNOWN");
    } finally {
      await this.docker.removeContainer(id, { force: true }).catch((err: unknown) => {
        this.log.warn({ container: id, image: imageId, err }, "could not remove a scratch container; it is removed at the next start");
      });
    }
  }

  private async fileOf(containerId: string, path: string): Promise<string | undefined> {
    const tar = await this.archiveOf(containerId, path);
    return tar && firstRegularFile(tar);
  }

  /** The tar of `path` in the scratch container; undefined when there is nothing at `path`. */
  private async archiveOf(containerId: string, path: string, options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<Readable | undefined> {
    try {
      return (await this.docker.containerArchive(containerId, path, options.signal, options.timeoutMs)).body as unknown as Readable;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw err;
    }
  }
}

/** The content of the tar stream's first entry when it is a regular file (bounded), else undefined. */
export async function firstRegularFile(tar: Readable): Promise<string | undefined> {
  // Loaded when first needed: only images with a named user or group take this path.
  const { extract } = await import("tar-stream");
  const reader = extract();
  tar.pipe(reader);
  try {
    for await (const entry of reader) {
      if (entry.header.type !== "file") return undefined;
      if ((entry.header.size ?? 0) > MAX_FILE_BYTES) {
        throw new Error(`${entry.header.name} is ${entry.header.size} bytes, more than the ${MAX_FILE_BYTES} read`);
      }
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString("utf8");
    }
    return undefined;
  } finally {
    // Only the first entry is wanted: the rest of the response is dropped with its connection.
    reader.destroy();
    tar.destroy();
  }
}
