/**
 * Reading a checkpoint archive (the layout checkpoint-archive.ts writes, and
 * CRI-O writes) for a restore. The archive is input from whoever could
 * write the file a CreateContainer names, so every entry is checked: its
 * name (no absolute path, no "..", no entry outside the known members), its
 * type (regular files and directories only under checkpoint/) and the size
 * of the JSON members, which are read into memory.
 *
 * One pass reads the metadata alone (to plan the restore before anything
 * is created); a second one, given a sink, hands CRIU's images and
 * rootfs-diff.tar over to be written where Docker will find them.
 */
import { createReadStream } from "node:fs";
import { posix } from "node:path";
import { CridockError, invalidArgument } from "../../errors.ts";
import { ARCHIVE } from "./checkpoint-archive.ts";
import type { CheckpointConfigDump, OciSpec } from "./checkpoint-metadata.ts";
// Types only: tar-stream itself is loaded on the first read (startup loads no tar code).
import type { Extract } from "tar-stream";

/** One entry of a tar being read: its header, and its body as a stream (tar-stream exports no name for it). */
export type TarEntry = Extract extends AsyncIterable<infer E> ? E : never;

/** config.dump, spec.dump and deleted.files are small: a larger one is not an archive of ours or CRI-O's. */
const MAX_JSON_BYTES = 8 * 1024 * 1024;
/** A name under checkpoint/: CRIU names its images with these characters only. */
const IMAGE_NAME = /^[A-Za-z0-9_.:+-]+$/;

export interface CheckpointArchiveMetadata {
  config: CheckpointConfigDump;
  spec: OciSpec;
  /** Absolute, clean paths the checkpointed container had deleted from its image's filesystem. */
  deleted: string[];
  hasRootfsDiff: boolean;
  /** Regular files under checkpoint/ (CRIU's images); a restore needs at least inventory.img. */
  imageFiles: number;
}

/** Where the second pass puts what Docker needs; names are relative to checkpoint/. */
export interface CheckpointArchiveSink {
  imageDirectory(name: string): Promise<void>;
  imageFile(name: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  rootfsDiff(body: AsyncIterable<Uint8Array>, size: number): Promise<void>;
}

/**
 * Reads the archive at `path` (its existence and type checked by the
 * caller). INVALID_ARGUMENT names the archive (or `label`, what the file is a
 * copy of) and what is wrong with it.
 */
export async function readCheckpointArchive(path: string, sink?: CheckpointArchiveSink, signal?: AbortSignal, label = path): Promise<CheckpointArchiveMetadata> {
  const bad = (what: string, cause?: unknown) => invalidArgument(`${label} is not a usable checkpoint archive: ${what}`, cause);
  const json = new Map<string, unknown>();
  let hasRootfsDiff = false;
  let imageFiles = 0;
  let inventory = false;
  const tar = await openTar(path);
  try {
    for await (const entry of tar.entries) {
      signal?.throwIfAborted();
      const { type, size = 0 } = entry.header;
      const name = entryName(entry.header.name);
      if (name === undefined) throw bad(`the entry ${JSON.stringify(entry.header.name)} is not a clean relative path`);
      if (name === ARCHIVE.checkpointDirectory && type === "directory") {
        entry.resume();
        continue;
      }
      if (name.startsWith(`${ARCHIVE.checkpointDirectory}/`)) {
        const image = name.slice(ARCHIVE.checkpointDirectory.length + 1);
        if (!image.split("/").every((part) => IMAGE_NAME.test(part))) throw bad(`the entry ${JSON.stringify(name)} is no name CRIU writes`);
        if (type === "directory") {
          entry.resume();
          await sink?.imageDirectory(image);
        } else if (type === "file" || type === "contiguous-file") {
          imageFiles++;
          if (image === "inventory.img") inventory = true;
          if (sink) await sink.imageFile(image, entry as AsyncIterable<Uint8Array>);
          else entry.resume();
        } else {
          throw bad(`${name} is a ${type}; only files and directories can be CRIU's images`);
        }
        continue;
      }
      if (type !== "file" && type !== "contiguous-file") throw bad(`${name} is a ${type}, not a file`);
      if (name === ARCHIVE.rootfsDiffTar) {
        hasRootfsDiff = true;
        if (sink) await sink.rootfsDiff(entry as AsyncIterable<Uint8Array>, size);
        else entry.resume();
      } else if (name === ARCHIVE.configDump || name === ARCHIVE.specDump || name === ARCHIVE.deletedFiles) {
        if (size > MAX_JSON_BYTES) throw bad(`${name} is ${size} bytes, more than the ${MAX_JSON_BYTES} allowed`);
        const chunks: Buffer[] = [];
        for await (const chunk of entry as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(chunk));
        try {
          json.set(name, JSON.parse(Buffer.concat(chunks).toString("utf8")));
        } catch (err) {
          throw bad(`${name} is not JSON`, err);
        }
      } else {
        // Other members CRI-O may add (stats-dump, bind.mounts, …): not needed to restore.
        entry.resume();
      }
    }
  } catch (err) {
    if (err instanceof CridockError) throw err;
    if (signal?.aborted) throw err;
    throw bad("it cannot be read as a tar archive", err);
  } finally {
    tar.close();
  }
  if (!inventory) throw bad(`it has no ${ARCHIVE.checkpointDirectory}/inventory.img (CRIU's images)`);
  return {
    config: checkedConfig(json.get(ARCHIVE.configDump), bad),
    spec: checkedSpec(json.get(ARCHIVE.specDump), bad),
    deleted: checkedDeleted(json.get(ARCHIVE.deletedFiles), bad),
    hasRootfsDiff,
    imageFiles,
  };
}

/**
 * The entries of the tar at `path` as they are read (tar-stream, loaded
 * on first use); `close` stops the reading: call it in a finally.
 */
export async function openTar(path: string): Promise<{ entries: AsyncIterable<TarEntry>; close(): void }> {
  const { extract } = await import("tar-stream");
  const reader = extract();
  const file = createReadStream(path);
  file.once("error", (err) => reader.destroy(err));
  file.pipe(reader);
  return {
    entries: reader,
    close() {
      reader.destroy();
      file.destroy();
    },
  };
}

/** An entry's name without "./" or a trailing "/"; undefined when it is absolute or leaves the archive. */
export function entryName(raw: string): string | undefined {
  const name = raw.replace(/^(\.\/)+/, "").replace(/\/+$/, "");
  if (!name || name.startsWith("/") || name.includes("\0")) return undefined;
  if (posix.normalize(name) !== name || name.split("/").includes("..")) return undefined;
  return name;
}

type Bad = (what: string, cause?: unknown) => Error;

function checkedConfig(value: unknown, bad: Bad): CheckpointConfigDump {
  if (value === undefined) throw bad(`it has no ${ARCHIVE.configDump}`);
  if (!isObject(value)) throw bad(`${ARCHIVE.configDump} is not a JSON object`);
  for (const field of ["rootfsImage", "rootfsImageRef", "rootfsImageName"] as const) {
    if (value[field] !== undefined && typeof value[field] !== "string") throw bad(`${ARCHIVE.configDump}'s ${field} is not a string`);
  }
  const config = value as unknown as CheckpointConfigDump;
  if (!config.rootfsImageRef && !config.rootfsImageName && !config.rootfsImage) {
    throw bad(`${ARCHIVE.configDump} names no image (rootfsImageRef, rootfsImageName or rootfsImage)`);
  }
  return config;
}

function checkedSpec(value: unknown, bad: Bad): OciSpec {
  if (value === undefined) throw bad(`it has no ${ARCHIVE.specDump}`);
  if (!isObject(value)) throw bad(`${ARCHIVE.specDump} is not a JSON object`);
  return value as OciSpec;
}

function checkedDeleted(value: unknown, bad: Bad): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw bad(`${ARCHIVE.deletedFiles} is not a JSON list`);
  return value.map((path) => {
    if (typeof path !== "string" || !path.startsWith("/") || path === "/" || path.includes("\0") || posix.normalize(path) !== path || path.endsWith("/")) {
      throw bad(`${ARCHIVE.deletedFiles} holds ${JSON.stringify(path)}, which is not a clean absolute path`);
    }
    return path;
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
