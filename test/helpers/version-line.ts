/**
 * What `cridock --version` prints (src/version.ts), as a pattern: the
 * version, then the commit the build baked in. A build made in a checkout
 * knows its commit; only the sources run outside one may say "unknown".
 */
import { CRIDOCK_VERSION } from "../../src/version.ts";

export function versionLinePattern(version: string = CRIDOCK_VERSION, { commitKnown = true } = {}): RegExp {
  const commit = commitKnown ? "[0-9a-f]{40}(-dirty)?" : "[0-9a-f]{40}(-dirty)?|unknown";
  return new RegExp(`^cridock ${version.replace(/[.+]/g, "\\$&")} \\(commit (${commit})\\)\\n$`);
}
