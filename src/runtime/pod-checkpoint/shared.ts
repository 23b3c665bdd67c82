/**
 * What CheckpointPod and RestorePod share: the caller's deadline or cancel
 * as the error they answer with (the server aborts the call's signal with
 * its own DEADLINE_EXCEEDED, cri/server.ts; a cancel with another reason),
 * dockerd's experimental mode asked before anything is done, and a work
 * directory of cridock's own beside CheckpointContainer's dumps.
 */
import { mkdir, mkdtemp } from "node:fs/promises";
import { join } from "node:path";
import type { DockerClient } from "../../docker/client.ts";
import { CridockError, deadlineExceeded } from "../../errors.ts";
import { CHECKPOINT_WORK_DIRECTORY, NOT_EXPERIMENTAL } from "../container/checkpoint.ts";

/** `during`: what was under way; `outcome`: what the caller finds after. */
export function abortError(signal: AbortSignal, during: string, outcome: string, cause?: unknown): CridockError {
  const reason: unknown = signal.reason;
  if (reason instanceof CridockError && reason.code !== "DEADLINE_EXCEEDED") return new CridockError(reason.code, `${during}: ${reason.message}; ${outcome}`, { cause });
  if (reason instanceof CridockError || (reason instanceof Error && reason.name === "TimeoutError")) {
    return deadlineExceeded(`the deadline passed while ${during}; ${outcome}`, cause);
  }
  return new CridockError("CANCELLED", `cancelled while ${during}; ${outcome}`, { cause });
}

/** UNIMPLEMENTED `what` when Docker serves no checkpoints. */
export async function requireCheckpoints(docker: DockerClient, what: string): Promise<void> {
  if (!(await docker.info()).ExperimentalBuild) throw new CridockError("UNIMPLEMENTED", `${what}: ${NOT_EXPERIMENTAL}`);
}

/** A fresh directory under <root>/checkpoint-work/, named from `prefix`; the caller removes it. */
export async function workDirectory(rootDirectory: string, prefix: string): Promise<string> {
  const root = join(rootDirectory, CHECKPOINT_WORK_DIRECTORY);
  await mkdir(root, { recursive: true, mode: 0o700 });
  return mkdtemp(join(root, prefix));
}
