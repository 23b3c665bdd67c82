/**
 * Checkpoint images for the tests, as `checkpointctl build` makes them and
 * Docker's classic image store keeps them (a manifest's annotations are not
 * kept): FROM scratch, no Entrypoint or Cmd, one layer whose tar is the
 * checkpoint archive itself (its members sit at the layer's root).
 */
import { readFile } from "node:fs/promises";
import { imageConfig, writeDockerArchive } from "../../scripts/env/images/docker-archive.ts";
import { layerOfTar } from "../../scripts/env/images/layer.ts";

/**
 * Writes a `docker load` tarball at `dest` of an image with nothing to run
 * whose one layer is the tar at `layerTar` (a checkpoint archive makes a
 * checkpoint image), tagged `tag`.
 */
export async function writeLayerImageArchive(layerTar: string, dest: string, tag: string): Promise<void> {
  const image = imageConfig({}, [layerOfTar(await readFile(layerTar))], `cridock tests: ${tag}`);
  await writeDockerArchive(dest, image, [tag]);
}
