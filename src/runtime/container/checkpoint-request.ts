/**
 * CheckpointContainer's request, checked before anything is dumped: where
 * the archive goes, and how long the whole checkpoint may take.
 */
import { stat } from "node:fs/promises";
import { dirname, isAbsolute, normalize } from "node:path";
import { invalidArgument } from "../../errors.ts";

/**
 * The archive's path, as kubelet names it
 * (/var/lib/kubelet/checkpoints/checkpoint-<pod>_<namespace>-<container>-<time>.tar):
 * absolute, without NUL, not a directory, in a directory that exists (cridock
 * creates no directories for a caller; kubelet makes its own). INVALID_ARGUMENT
 * naming the location otherwise.
 */
export async function checkedLocation(location: string | undefined): Promise<string> {
  if (!location) throw invalidArgument("location is required: the path of the checkpoint archive to write");
  const shown = JSON.stringify(location.length > 200 ? `${location.slice(0, 197)}...` : location);
  if (location.includes("\0")) throw invalidArgument(`location ${shown} contains a NUL byte`);
  if (!isAbsolute(location)) throw invalidArgument(`location ${shown} is not an absolute path`);
  if (location.endsWith("/")) throw invalidArgument(`location ${shown} names a directory, not an archive file`);
  const path = normalize(location);
  const directory = dirname(path);
  const parent = await stat(directory).catch((err: NodeJS.ErrnoException) => {
    throw invalidArgument(`location ${shown}: its directory ${directory} ${err.code === "ENOENT" ? "does not exist" : "cannot be read"}`, err);
  });
  if (!parent.isDirectory()) throw invalidArgument(`location ${shown}: ${directory} is not a directory`);
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isDirectory()) throw invalidArgument(`location ${shown} is a directory, not an archive file`);
  return path;
}

/** The longest timeout taken (a year), so that a huge int64 is no overflow. */
const MAX_TIMEOUT_SECONDS = 365n * 24n * 3600n;

/**
 * The checkpoint's deadline in milliseconds: the request's timeout (seconds);
 * for 0 (kubelet sends 0 unless its API call names a timeout, and then holds
 * the call to its runtime request timeout), `defaultMs`, cridock's own
 * --runtime-request-timeout. A negative timeout is INVALID_ARGUMENT.
 */
export function checkpointDeadlineMs(timeoutSeconds: bigint | number | undefined, defaultMs: number): number {
  const seconds = BigInt(timeoutSeconds ?? 0);
  if (seconds < 0n) throw invalidArgument(`timeout ${seconds} is negative`);
  if (seconds === 0n) return defaultMs;
  return Number(seconds > MAX_TIMEOUT_SECONDS ? MAX_TIMEOUT_SECONDS : seconds) * 1000;
}
