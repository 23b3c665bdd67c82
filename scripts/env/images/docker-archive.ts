/**
 * An image as `docker load` reads it: manifest.json naming the config file,
 * the repo tags and the layer tars. The config's sha256 is the image id
 * Docker will report, so it is known before loading.
 */
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import tar from "tar-stream";
import type { Layer } from "./layer.ts";

/** The runtime part of an image config (Docker's field names). */
export interface ImageRunConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  User?: string;
  WorkingDir?: string;
  ExposedPorts?: Record<string, Record<string, never>>;
  StopSignal?: string;
  Labels?: Record<string, string>;
  Volumes?: Record<string, Record<string, never>>;
}

export interface BuiltImage {
  /** `sha256:<hex>` of the config: Docker's image id. */
  id: string;
  configJson: Buffer;
  layers: Layer[];
}

const CREATED = "2024-01-01T00:00:00Z";

export function imageConfig(run: ImageRunConfig, layers: Layer[], comment: string): BuiltImage {
  const config = {
    architecture: process.arch === "arm64" ? "arm64" : "amd64",
    os: "linux",
    created: CREATED,
    config: run,
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.diffId) },
    history: layers.map(() => ({ created: CREATED, created_by: comment })),
  };
  const configJson = Buffer.from(JSON.stringify(config));
  return { id: `sha256:${createHash("sha256").update(configJson).digest("hex")}`, configJson, layers };
}

function hex(digest: string): string {
  return digest.replace(/^sha256:/, "");
}

/** Writes a `docker load` tarball for one image with the given tags. */
export async function writeDockerArchive(path: string, image: BuiltImage, repoTags: string[]): Promise<void> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk as Buffer);
  })();
  const mtime = new Date(CREATED);
  const configName = `${hex(image.id)}.json`;
  const layerNames = image.layers.map((l) => `${hex(l.diffId)}/layer.tar`);
  const manifest = [{ Config: configName, RepoTags: repoTags, Layers: layerNames }];
  pack.entry({ name: "manifest.json", mtime }, JSON.stringify(manifest));
  pack.entry({ name: configName, mtime }, image.configJson);
  image.layers.forEach((layer, i) => {
    pack.entry({ name: `${hex(layer.diffId)}/`, type: "directory", mode: 0o755, mtime });
    pack.entry({ name: layerNames[i]!, mtime }, layer.tar);
  });
  pack.finalize();
  await collected;
  await writeFile(path, Buffer.concat(chunks));
}
