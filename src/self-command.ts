/**
 * How this cridock runs itself again: as the self-contained executable
 * (scripts/build/binary.ts), whose process.execPath is cridock itself, or as
 * a script under node (with its flags, tsx's loader among them) or deno. The
 * network's spawn helpers need to know which (a node runs `-e`, the
 * executable does not), and so does the OCI layer's launcher, which runs
 * `cridock oci-edit` (src/oci/launcher.ts).
 */
import process from "node:process";

let selfContained = false;

/** Told by the executable's entry (src/executable.ts) before anything else runs. */
export function markSelfContained(): void {
  selfContained = true;
}

export function isSelfContained(): boolean {
  return selfContained;
}

/** The command, as absolute paths and flags, that runs this cridock with other arguments. */
export function selfCommand(): string[] {
  if (selfContained) return [process.execPath];
  const script = process.argv[1] ?? "";
  const absolute = script.startsWith("/") ? script : `${process.cwd()}/${script}`;
  if ((globalThis as { Deno?: unknown }).Deno !== undefined) return [process.execPath, "run", "--allow-all", absolute];
  return [process.execPath, ...process.execArgv, absolute];
}
