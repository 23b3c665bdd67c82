/**
 * The pod checkpoint archive: a tar holding
 *   pod.json               the manifest (manifest.ts)
 *   containers/<name>.tar  each container's CheckpointContainer archive
 * written atomically beside output_path (checkpoint-archive.ts's
 * writeTarAtomically: temporary file, fsync, rename; removed on failure).
 *
 * Reading it for a restore takes the manifest and copies each container's
 * archive into a work directory, where the single-container restore reads
 * it as it reads any archive. The tar is hostile input: only those members,
 * regular files only, each container once and named in the manifest, the
 * manifest bounded in size and first, and the copies bounded by the
 * archive's own size (tar headers cannot make them larger).
 */
import { createReadStream, createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { CridockError, invalidArgument } from "../../errors.ts";
import { addEntry, writeTarAtomically } from "../container/checkpoint-archive.ts";
import { entryName, openTar } from "../container/checkpoint-archive-read.ts";
import { CONTAINERS_DIRECTORY, MAX_CONTAINERS, MAX_MANIFEST_BYTES, POD_MANIFEST, isContainerMember, parseManifest, type PodManifest } from "./manifest.ts";

const FILE_MODE = 0o600;

/** Writes the pod archive at `path` from the manifest and the container archives (member name → file). */
export async function writePodArchive(path: string, manifest: PodManifest, containerArchives: ReadonlyMap<string, string>, signal?: AbortSignal): Promise<void> {
  await writeTarAtomically(
    path,
    async (pack) => {
      const now = new Date();
      await addEntry(pack, { name: POD_MANIFEST, mode: FILE_MODE, mtime: now }, Buffer.from(JSON.stringify(manifest, null, 2)));
      for (const c of manifest.containers) {
        signal?.throwIfAborted();
        const file = containerArchives.get(c.archive);
        if (!file) throw new Error(`no archive for container ${c.name}`);
        const info = await stat(file);
        await addEntry(pack, { name: c.archive, size: info.size, mode: FILE_MODE, mtime: info.mtime }, createReadStream(file));
      }
    },
    signal,
  );
}

export interface ExtractedPodArchive {
  manifest: PodManifest;
  /** Container name → its archive's copy in the work directory. */
  containers: Map<string, string>;
}

/**
 * Reads the pod archive at `path` (checked by request.ts) into `work` (an
 * empty directory of cridock's own). INVALID_ARGUMENT names the archive
 * and what is wrong with it.
 */
export async function readPodArchive(path: string, work: string, signal?: AbortSignal): Promise<ExtractedPodArchive> {
  const bad = (what: string, cause?: unknown) => invalidArgument(`${path} is not a usable pod checkpoint archive: ${what}`, cause);
  const archiveBytes = (await stat(path)).size;
  let manifest: PodManifest | undefined;
  const containers = new Map<string, string>();
  let copied = 0;
  const tar = await openTar(path);
  try {
    for await (const entry of tar.entries) {
      signal?.throwIfAborted();
      const { type, size = 0, name: raw } = entry.header;
      const name = entryName(raw);
      if (name === undefined) throw bad(`the entry ${JSON.stringify(raw.slice(0, 200))} is not a clean relative path`);
      if (type === "directory" && name === CONTAINERS_DIRECTORY) {
        entry.resume();
        continue;
      }
      if (type !== "file" && type !== "contiguous-file") throw bad(`${name} is a ${type}; the archive holds regular files only`);
      if (name === POD_MANIFEST) {
        if (manifest) throw bad(`it holds ${POD_MANIFEST} twice`);
        if (size > MAX_MANIFEST_BYTES) throw bad(`${POD_MANIFEST} is ${size} bytes, more than the ${MAX_MANIFEST_BYTES} allowed`);
        const chunks: Buffer[] = [];
        for await (const chunk of entry as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(chunk));
        manifest = parseManifest(Buffer.concat(chunks).toString("utf8"), path);
        continue;
      }
      if (!isContainerMember(name)) throw bad(`${JSON.stringify(name.slice(0, 200))} is no member of a pod checkpoint (${POD_MANIFEST}, containers/<name>.tar)`);
      // Written first by cridock: a container archive before it is one no manifest vouches for.
      if (!manifest) throw bad(`${name} comes before ${POD_MANIFEST}`);
      const c = manifest.containers.find((x) => x.archive === name);
      if (!c) throw bad(`${name} is not named in ${POD_MANIFEST}`);
      if (containers.has(c.name)) throw bad(`it holds ${name} twice`);
      copied += size;
      if (copied > archiveBytes) throw bad("its members are larger than the archive itself");
      const target = join(work, `${containers.size}.tar`);
      await pipeline(Readable.from(entry as AsyncIterable<Uint8Array>), createWriteStream(target, { flags: "wx", mode: FILE_MODE }), { signal });
      containers.set(c.name, target);
      if (containers.size > MAX_CONTAINERS) throw bad(`it holds more than ${MAX_CONTAINERS} containers`);
    }
  } catch (err) {
    if (err instanceof CridockError) throw err;
    if (signal?.aborted) throw err;
    throw bad("it cannot be read as a tar archive", err);
  } finally {
    tar.close();
  }
  if (!manifest) throw bad(`it has no ${POD_MANIFEST}`);
  const missing = manifest.containers.filter((c) => !containers.has(c.name)).map((c) => c.archive);
  if (missing.length > 0) throw bad(`${missing.join(", ")} named in ${POD_MANIFEST} ${missing.length > 1 ? "are" : "is"} missing`);
  return { manifest, containers };
}
