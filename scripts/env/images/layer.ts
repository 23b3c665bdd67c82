/**
 * A filesystem layer as a list of entries, and its uncompressed tar. Entries
 * carry fixed owners and times so the same inputs always give the same bytes,
 * hence the same layer digest and image id across rebuilds and machines.
 */
import { createHash } from "node:crypto";
import { posix } from "node:path";
import tar from "tar-stream";

export type LayerEntry =
  | { kind: "dir"; path: string; mode?: number }
  | { kind: "file"; path: string; content: Buffer | string; mode?: number; uid?: number; gid?: number }
  | { kind: "symlink"; path: string; target: string }
  /** Another name for the file entry at `target` (same inode once extracted). */
  | { kind: "hardlink"; path: string; target: string };

export interface Layer {
  tar: Buffer;
  /** sha256 of the uncompressed tar: the image config's diff_id. */
  diffId: string;
}

/** Fixed timestamp for every entry: reproducible layers. */
const EPOCH = new Date("2024-01-01T00:00:00Z");

/** Strips the leading slash tar entries must not have, and rejects escapes. */
function entryName(path: string): string {
  const normal = posix.normalize(path).replace(/^\/+/, "");
  if (normal === "" || normal.startsWith("..")) throw new Error(`bad layer path "${path}"`);
  return normal;
}

/**
 * Adds the parent directories an entry list leaves implicit, drops exact
 * duplicates (the last entry for a path wins), and sorts parents first.
 */
export function normalizeEntries(entries: LayerEntry[]): LayerEntry[] {
  const byPath = new Map<string, LayerEntry>();
  for (const entry of entries) {
    const name = entryName(entry.path);
    let parent = posix.dirname(name);
    while (parent !== "." && !byPath.has(parent)) {
      byPath.set(parent, { kind: "dir", path: parent });
      parent = posix.dirname(parent);
    }
    byPath.set(name, { ...entry, path: name });
  }
  for (const entry of byPath.values()) {
    if (entry.kind === "hardlink" && byPath.get(entryName(entry.target))?.kind !== "file") {
      throw new Error(`hard link ${entry.path} points at ${entry.target}, which is not a file of this layer`);
    }
  }
  // Hard links come after every file: an extractor links to a name it has already written.
  const rank = (e: LayerEntry) => (e.kind === "hardlink" ? 1 : 0);
  return [...byPath.values()].sort((a, b) => rank(a) - rank(b) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export async function buildLayer(entries: LayerEntry[]): Promise<Layer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  for (const entry of normalizeEntries(entries)) {
    const common = { name: entry.path, uid: 0, gid: 0, mtime: EPOCH };
    if (entry.kind === "dir") {
      pack.entry({ ...common, type: "directory", mode: entry.mode ?? 0o755 });
    } else if (entry.kind === "symlink") {
      pack.entry({ ...common, type: "symlink", linkname: entry.target, mode: 0o777 });
    } else if (entry.kind === "hardlink") {
      pack.entry({ ...common, type: "link", linkname: entryName(entry.target), mode: 0o755 });
    } else {
      const content = typeof entry.content === "string" ? Buffer.from(entry.content) : entry.content;
      pack.entry({ ...common, uid: entry.uid ?? 0, gid: entry.gid ?? 0, type: "file", mode: entry.mode ?? 0o644 }, content);
    }
  }
  pack.finalize();
  await collected;
  return layerOfTar(Buffer.concat(chunks));
}

/** A layer whose uncompressed tar is `tar` as it is (built elsewhere: a checkpoint archive, say). */
export function layerOfTar(tar: Buffer): Layer {
  return { tar, diffId: `sha256:${createHash("sha256").update(tar).digest("hex")}` };
}
