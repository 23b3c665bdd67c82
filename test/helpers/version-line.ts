/**
 * What cridock prints about itself, as patterns: `cridock --version`
 * (src/version.ts) and `cridock check`'s runtime line of an executable.
 */
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { pinnedNode } from "../../scripts/build/node-runtime.ts";
import { escapeRegExp } from "./regexp.ts";

/**
 * `cridock --version`: the version, then the commit the build baked in. A
 * build made in a checkout knows its commit; only the sources run outside
 * one may say "unknown".
 */
export function versionLinePattern(version: string = CRIDOCK_VERSION, { commitKnown = true } = {}): RegExp {
  const commit = commitKnown ? "[0-9a-f]{40}(-dirty)?" : "[0-9a-f]{40}(-dirty)?|unknown";
  return new RegExp(`^cridock ${escapeRegExp(version)} \\(commit (${commit})\\)\\n$`);
}

/** `cridock check`'s runtime line (one line of its output, "m") for `executable` running the pinned Node embedded. */
export function embeddedRuntimeLinePattern(executable: string): RegExp {
  return new RegExp(`^OK +runtime +Node\\.js ${escapeRegExp(`v${pinnedNode().version}`)} \\(V8 [^)]+\\) embedded in ${escapeRegExp(executable)}$`, "m");
}
