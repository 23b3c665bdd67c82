/**
 * CheckpointPod's and RestorePod's requests checked before anything is
 * paused or created: the paths (absolute, clean, no symbolic link on the
 * way, so that the archive lands or is read where the caller named it and
 * nowhere a link points to) and the options map (KEP-5823: a runtime
 * refuses keys it does not know; cridock knows none yet).
 */
import { lstat, realpath } from "node:fs/promises";
import { dirname, posix } from "node:path";
import { CridockError, invalidArgument, notFound } from "../../errors.ts";
import { checkedLocation } from "../container/checkpoint-request.ts";

const shown = (path: string) => JSON.stringify(path.length > 200 ? `${path.slice(0, 197)}...` : path);

/**
 * output_path: checkedLocation's rules (absolute, no NUL, not a directory,
 * its directory exists), written clean, in a directory reached without a
 * symbolic link; an existing file there must be a regular file (it is
 * replaced atomically by a rename, which would replace a link itself, but a
 * link there is a sign of someone steering the write: refused).
 */
export async function checkedOutputPath(outputPath: string | undefined): Promise<string> {
  if (!outputPath) throw invalidArgument("output_path is required: the path of the pod checkpoint archive to write");
  if (posix.normalize(outputPath) !== outputPath) throw invalidArgument(`output_path ${shown(outputPath)} is not a clean path (no "..", "." or "//")`);
  const path = await checkedLocation(outputPath).catch((err: unknown) => {
    // Its messages name CheckpointContainer's field: said with this RPC's.
    throw err instanceof CridockError ? new CridockError(err.code, err.message.replace(/^location/, "output_path"), { cause: err.cause }) : err;
  });
  await noLinkOnTheWay(path, "output_path");
  const existing = await lstat(path).catch(() => undefined);
  if (existing && !existing.isFile()) throw invalidArgument(`output_path ${shown(path)} exists and is not a regular file`);
  return path;
}

/** checkpoint_path: an existing regular file, absolute and clean, reached without a symbolic link. */
export async function checkedArchivePath(checkpointPath: string | undefined): Promise<{ path: string; size: number }> {
  if (!checkpointPath) throw invalidArgument("checkpoint_path is required: the path of a pod checkpoint archive");
  if (checkpointPath.includes("\0") || !checkpointPath.startsWith("/") || posix.normalize(checkpointPath) !== checkpointPath) {
    throw invalidArgument(`checkpoint_path ${shown(checkpointPath)} is not a clean absolute path`);
  }
  const info = await lstat(checkpointPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") throw notFound(`pod checkpoint archive ${checkpointPath} does not exist`, err);
    throw invalidArgument(`pod checkpoint archive ${checkpointPath} cannot be read`, err);
  });
  if (!info.isFile()) throw invalidArgument(`checkpoint_path ${shown(checkpointPath)} is not a regular file${info.isSymbolicLink() ? " (a symbolic link)" : ""}`);
  await noLinkOnTheWay(checkpointPath, "checkpoint_path");
  return { path: checkpointPath, size: info.size };
}

/** The path's directory must be where it says: no component of it is a symbolic link. */
async function noLinkOnTheWay(path: string, field: string): Promise<void> {
  const directory = dirname(path);
  const real = await realpath(directory).catch((err: unknown) => {
    throw invalidArgument(`${field} ${shown(path)}: its directory cannot be resolved`, err);
  });
  if (real !== directory) throw invalidArgument(`${field} ${shown(path)}: its directory ${directory} goes through a symbolic link (to ${real}); name the real path`);
}

/** KEP-5823: unknown option keys are refused, not ignored. */
export function checkedOptions(options: Record<string, string> | undefined, rpc: string): void {
  const keys = Object.keys(options ?? {});
  if (keys.length > 0) {
    throw invalidArgument(`${rpc}: unknown option${keys.length > 1 ? "s" : ""} ${keys.slice(0, 5).map((k) => JSON.stringify(k.slice(0, 80))).join(", ")}; cridock takes no options for it`);
  }
}
