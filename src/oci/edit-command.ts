/**
 * `cridock oci-edit --bundle DIR --edits FILE [--log FILE]`: the runtime
 * layer's one step that needs cridock (launcher.ts runs it on a create or
 * restore with edits): adds the edits to DIR/config.json, in place, before
 * the real runtime reads it. Exit 0 when applied; 1 with the reason on
 * stderr, and as an error line in the runtime's JSON log, which containerd
 * reads to say why a start failed ("OCI runtime create failed: …").
 */
import { appendFile, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { readEdits } from "./edits-store.ts";
import { replaceFile } from "./replace-file.ts";
import { applySpecEdits } from "./spec-edits.ts";

export async function applyEditsToBundle(bundle: string, editsPath: string): Promise<void> {
  const edits = await readEdits(editsPath);
  const configPath = join(resolve(bundle), "config.json");
  const spec = applySpecEdits(JSON.parse(await readFile(configPath, "utf8")), edits);
  await replaceFile(configPath, JSON.stringify(spec), (await stat(configPath)).mode & 0o777);
}

export async function runOciEdit(argv: string[]): Promise<number> {
  let values: { bundle?: string; edits?: string; log?: string };
  try {
    ({ values } = parseArgs({ args: argv, options: { bundle: { type: "string" }, edits: { type: "string" }, log: { type: "string" } }, strict: true }));
  } catch (err) {
    process.stderr.write(`cridock oci-edit: ${(err as Error).message}\n`);
    return 2;
  }
  if (!values.bundle || !values.edits) {
    process.stderr.write("cridock oci-edit: --bundle and --edits are required (the runtime layer's launcher passes them)\n");
    return 2;
  }
  try {
    await applyEditsToBundle(values.bundle, values.edits);
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
