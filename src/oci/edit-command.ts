/**
 * `cridock oci-edit --bundle DIR --edits FILE [--id ID --rootfs-dir DIR --outer-mntns NS] [--log FILE]`:
 * the runtime layer's one step that needs cridock (launcher.ts runs it on a
 * create, run or restore with edits): adds the edits to DIR/config.json, in
 * place, before the real runtime reads it; for a container in a pod's user
 * namespace it first makes its idmapped rootfs (idmapped-rootfs.ts), in
 * the mount namespace of its own the launcher made (NS is its caller's,
 * which it must differ from).
 * `cridock oci-edit --release --id ID --rootfs-dir DIR`, run on the
 * runtime's `delete` only for a container whose mounts a launcher of
 * format 2 left in the host's namespace, undoes that.
 *
 * Fail closed: a spec that carries the userns mark (runtime/pod-userns.ts)
 * with edits that do not put it in its pod's user namespace is refused.
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
import { USERNS_ANNOTATION } from "./launcher.ts";
import { replaceFile } from "./replace-file.ts";
import { applySpecEdits, applyUserns } from "./spec-edits.ts";

/** The largest config.json read: Docker's specs are tens of kilobytes. */
const CONFIG_MAX = 16 * 1024 * 1024;

/** Where a container in a user namespace gets its idmapped rootfs: the layer's directory and the container's id. */
export interface RootfsTarget {
  rootfsDir: string;
  id: string;
  /** The mount namespace of the launcher's caller (readlink of its /proc/<pid>/ns/mnt); this process must run in another. */
  outerMntns?: string;
}

/** Whether the spec carries the userns mark: its annotation, whatever its value. */
export function carriesUsernsMark(spec: unknown): boolean {
  const annotations = (spec as { annotations?: unknown } | null)?.annotations;
  return !!annotations && typeof annotations === "object" && Object.hasOwn(annotations, USERNS_ANNOTATION);
}

async function readConfig(path: string): Promise<unknown> {
  const info = await stat(path);
  if (!info.isFile()) throw new Error(`the bundle's ${path} is not a file`);
  if (info.size > CONFIG_MAX) throw new Error(`the bundle's ${path} is ${info.size} bytes, more than any spec Docker writes`);
  try {
    return JSON.parse(await readFile(path, "utf8"));
  } catch (err) {
    throw new Error(`the bundle's ${path} is not JSON: ${(err as Error).message}`);
  }
}

export async function applyEditsToBundle(bundle: string, editsPath: string, target?: RootfsTarget): Promise<void> {
  const edits = await readEdits(editsPath);
  const configPath = join(resolve(bundle), "config.json");
  const config = await readConfig(configPath);
  // Marked for its pod's user namespace: only with edits that put it there, never in the host's.
  if (carriesUsernsMark(config) && !edits.userns) throw new Error(`the container is marked for its pod's user namespace (${USERNS_ANNOTATION}) and its spec edits do not give it one`);
  let spec = applySpecEdits(config, edits);
  // A launcher from before user namespaces passes no directory: never run such a container in the host's.
  if (edits.userns && !target) throw new Error("the container is to run in its pod's user namespace, and this launcher has no rootfs directory: run `cridock oci-layer install` again");
  const prepared = edits.userns && target ? await prepareUserns(target.rootfsDir, target.id, bundle, spec, edits.userns, target.outerMntns) : undefined;
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
  let values: { bundle?: string; edits?: string; log?: string; id?: string; "rootfs-dir"?: string; "outer-mntns"?: string; release?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        bundle: { type: "string" },
        edits: { type: "string" },
        log: { type: "string" },
        id: { type: "string" },
        "rootfs-dir": { type: "string" },
        "outer-mntns": { type: "string" },
        release: { type: "boolean" },
      },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`cridock oci-edit: ${(err as Error).message}\n`);
    return 2;
  }
  const target = values.id && values["rootfs-dir"] ? { id: values.id, rootfsDir: values["rootfs-dir"], outerMntns: values["outer-mntns"] } : undefined;
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
