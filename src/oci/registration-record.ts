/**
 * What `cridock oci-layer install` registered, recorded for the server: the
 * launcher, the daemon.json and dockerd pid file it used, and the
 * launcher's settings. The record is the operator's intent that the layer
 * be registered: while it exists, a server that finds the layer gone from
 * dockerd (a tool rewrote daemon.json: layer-reregister.ts) puts it back
 * exactly as install did; `cridock oci-layer uninstall` removes it first,
 * so that nothing re-adds what the operator took away. With
 * CRIDOCK_OCI_LAYER=no the package never installs, and there is no record.
 *
 * It is root's (0600) and is checked like the edits files: a record anyone
 * else could write would let them choose what root writes into daemon.json.
 */
import { constants } from "node:fs";
import { lstat, open, rm } from "node:fs/promises";
import process from "node:process";
import { isCommandName } from "./launcher.ts";
import { replaceFile } from "./replace-file.ts";

/** Where install records, by default (the server looks in its --root-directory). */
export const DEFAULT_RECORD = "/var/lib/cridock/oci-layer.json";
export const RECORD_NAME = "oci-layer.json";

export interface LayerRegistration {
  launcher: string;
  daemonJson: string;
  dockerPidFile: string;
  /** The real runtime: an absolute path, or a command name (launcher.ts). */
  delegate: string;
  editsDir: string;
  rootfsDir: string;
}

const PATH_FIELDS = ["launcher", "daemonJson", "dockerPidFile", "editsDir", "rootfsDir"] as const;

function checkedRegistration(value: unknown, path: string): LayerRegistration {
  const v = value as Record<string, unknown> | null;
  if (!v || typeof v !== "object" || Array.isArray(v) || v.version !== 1) throw new Error(`${path} is not a layer registration record (version 1)`);
  for (const field of PATH_FIELDS) {
    const p = v[field];
    if (typeof p !== "string" || !p.startsWith("/") || /[\0-\x1f\x7f]/.test(p)) throw new Error(`${path}: "${field}" is not an absolute path`);
  }
  const delegate = v.delegate;
  if (typeof delegate !== "string" || !(isCommandName(delegate) || (delegate.startsWith("/") && !/[\0-\x1f\x7f]/.test(delegate)))) {
    throw new Error(`${path}: "delegate" is neither a command name nor an absolute path`);
  }
  return {
    launcher: v.launcher as string,
    daemonJson: v.daemonJson as string,
    dockerPidFile: v.dockerPidFile as string,
    delegate,
    editsDir: v.editsDir as string,
    rootfsDir: v.rootfsDir as string,
  };
}

export async function writeRecord(path: string, registration: LayerRegistration): Promise<void> {
  await replaceFile(path, JSON.stringify({ version: 1, ...registration }, null, 2) + "\n", 0o600, { durable: true });
}

/** The record at `path`; undefined when there is none. Throws when it exists and cannot be trusted or read. */
export async function readRecord(path: string): Promise<LayerRegistration | undefined> {
  let info;
  try {
    info = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const me = process.getuid?.() ?? 0;
  if (!info.isFile()) throw new Error(`${path} is not a regular file`);
  if (info.uid !== 0 && info.uid !== me) throw new Error(`${path} is owned by uid ${info.uid}, not root`);
  if ((info.mode & 0o022) !== 0) throw new Error(`${path} is writable by group or others (mode ${(info.mode & 0o777).toString(8)})`);
  if (info.size > 64 * 1024) throw new Error(`${path} is ${info.size} bytes, more than a record holds`);
  // O_NOFOLLOW: a symlink swapped in after the lstat is refused, not followed.
  const file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await file.readFile("utf8"));
    } catch (err) {
      throw new Error(`${path} is not JSON (${(err as Error).message})`);
    }
    return checkedRegistration(parsed, path);
  } finally {
    await file.close();
  }
}

export async function removeRecord(path: string): Promise<void> {
  await rm(path, { force: true });
}
