/**
 * cridock's own version and the commit it was built from: what `cridock
 * --version` and `cridock check --version` print and what the packages are
 * named after and describe. A module of its own so that everything may read
 * it without importing main.ts (the entry, which imports everything else).
 * package.json carries the same version (semantic versioning; each release
 * has its CHANGELOG.md entry); a unit test keeps the two equal. Not the CRI
 * Version.version field, which the protocol fixes (cri/runtime-info-rpcs.ts).
 *
 * The commit is baked into the bundle and the executable at build time
 * (scripts/build/bundle.ts defines CRIDOCK_BUILD_COMMIT); run from the
 * sources (tsx, Deno) it is read from git when the sources are a checkout of
 * their own, and is "unknown" when neither tells. "-dirty" after it says the
 * tree had changes no commit holds.
 */
import { execFileSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const CRIDOCK_VERSION = "0.2.0";

declare const CRIDOCK_BUILD_COMMIT: string | undefined;
const BAKED_COMMIT = typeof CRIDOCK_BUILD_COMMIT === "string" ? CRIDOCK_BUILD_COMMIT : undefined;

/** A full commit id, marked when the tree it was built from had uncommitted changes. */
const COMMIT = /^[0-9a-f]{40}(-dirty)?$/;

/** What is printed when neither the build nor git says which commit this is. */
export const UNKNOWN_COMMIT = "unknown";

/** `commit` when it is a commit id (optionally -dirty), else undefined: whatever a build or git handed over is checked. */
export function validCommit(commit: string | undefined): string | undefined {
  const trimmed = commit?.trim();
  return trimmed !== undefined && COMMIT.test(trimmed) ? trimmed : undefined;
}

/**
 * The commit checked out at `root`, "-dirty" when its tracked or untracked
 * files differ from it; undefined when `root` is not the top of a git
 * checkout (an installed package inside someone else's repository must not
 * report that repository's commit) or git is missing.
 */
export function gitCommit(root: string): string | undefined {
  const git = (...args: string[]) => execFileSync("git", ["-C", root, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 10_000 });
  try {
    const [top, head] = git("rev-parse", "--show-toplevel", "HEAD").trim().split("\n");
    if (!top || realpathSync(top) !== realpathSync(root)) return undefined;
    const dirty = git("status", "--porcelain").trim() !== "";
    return validCommit(`${head}${dirty ? "-dirty" : ""}`);
  } catch {
    return undefined;
  }
}

let commitRead: string | undefined;

/** The commit this cridock was built from (see above), read once. */
export function cridockCommit(): string {
  if (BAKED_COMMIT !== undefined) return validCommit(BAKED_COMMIT) ?? UNKNOWN_COMMIT;
  if (commitRead === undefined) {
    let root: string | undefined;
    try {
      root = fileURLToPath(new URL("../", import.meta.url));
    } catch {
      // Not a file: URL (an embedded script): there is no checkout to ask.
    }
    commitRead = (root && gitCommit(root)) || UNKNOWN_COMMIT;
  }
  return commitRead;
}

/** The line `--version` prints: `cridock 0.2.0 (commit <id>)`. */
export function versionLine(version: string = CRIDOCK_VERSION, commit: string = cridockCommit()): string {
  return `cridock ${version} (commit ${commit})`;
}
