/**
 * `cridock oci-edit --bundle DIR --edits FILE [--id ID --rootfs-dir DIR] [--log FILE]`:
 * the runtime layer's one step that needs cridock (launcher.ts runs it on a
 * create or restore with edits): adds the edits to DIR/config.json, in
 * place, before the real runtime reads it; for a container in a pod's user
 * namespace it first makes its idmapped rootfs (idmapped-rootfs.ts).
 * `cridock oci-edit --release --id ID --rootfs-dir DIR`, run on the
 * runtime's `delete`, undoes that.
 * Exit 0 when done; 1 with the reason on stderr, and as an error line in
 * the runtime's JSON log, which containerd reads to say why a start failed
 * ("OCI runtime create failed: …").
 */
import { appendFile, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { readEdits } from "./edits-store.ts";
import { prepareUserns, release } from "./idmapped-rootfs.ts";
import { replaceFile } from "./replace-file.ts";
import { applySpecEdits, applyUserns } from "./spec-edits.ts";

/** Where a container in a user namespace gets its idmapped rootfs: the layer's directory and the container's id. */
export interface RootfsTarget {
  rootfsDir: string;
  id: string;
}

export async function applyEditsToBundle(bundle: string, editsPath: string, target?: RootfsTarget): Promise<void> {
  const edits = await readEdits(editsPath);
  const configPath = join(resolve(bundle), "config.json");
  let spec = applySpecEdits(JSON.parse(await readFile(configPath, "utf8")), edits);
  // A launcher from before user namespaces passes no directory: never run such a container in the host's.
  if (edits.userns && !target) throw new Error("the container is to run in its pod's user namespace, and this launcher has no rootfs directory: run `cridock oci-layer install` again");
  const prepared = edits.userns && target ? await prepareUserns(target.rootfsDir, target.id, bundle, spec, edits.userns) : undefined;
  try {
    if (edits.userns && prepared) spec = applyUserns(spec, edits.userns, prepared);
    await replaceFile(configPath, JSON.stringify(spec), (await stat(configPath)).mode & 0o777);
  } catch (err) {
    // The container does not start: its idmapped mounts go with it.
    if (prepared && target) await release(target.rootfsDir, target.id).catch(() => undefined);
    throw err;
  }
}

export async function runOciEdit(argv: string[]): Promise<number> {
  let values: { bundle?: string; edits?: string; log?: string; id?: string; "rootfs-dir"?: string; release?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { bundle: { type: "string" }, edits: { type: "string" }, log: { type: "string" }, id: { type: "string" }, "rootfs-dir": { type: "string" }, release: { type: "boolean" } },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`cridock oci-edit: ${(err as Error).message}\n`);
    return 2;
  }
  const target = values.id && values["rootfs-dir"] ? { id: values.id, rootfsDir: values["rootfs-dir"] } : undefined;
  if (values.release) {
    if (!target) {
      process.stderr.write("cridock oci-edit --release: --id and --rootfs-dir are required (the runtime layer's launcher passes them)\n");
      return 2;
    }
    try {
      await release(target.rootfsDir, target.id);
      return 0;
    } catch (err) {
      process.stderr.write(`cridock OCI layer: the idmapped rootfs of container ${target.id} could not be released: ${(err as Error).message}\n`);
      return 1;
    }
  }
  if (!values.bundle || !values.edits) {
    process.stderr.write("cridock oci-edit: --bundle and --edits are required (the runtime layer's launcher passes them)\n");
    return 2;
  }
  try {
    await applyEditsToBundle(values.bundle, values.edits, target);
    return 0;
  } catch (err) {
    const message = `cridock OCI layer: the container's spec edits could not be applied, so it was not started: ${(err as Error).message}`;
    process.stderr.write(message + "\n");
    if (values.log) {
      const line = JSON.stringify({ level: "error", msg: message, time: new Date().toISOString() });
      await appendFile(values.log, line + "\n").catch(() => undefined);
    }
    return 1;
  }
}
