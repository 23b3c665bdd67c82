/**
 * What scripts/build/release.sh checks before it builds anything: that
 * VERSION is a semantic version (semver.org 2.0.0), that package.json and
 * src/version.ts carry it, that CHANGELOG.md has its entry (a
 * `## [VERSION] - YYYY-MM-DD` heading with at least one item under it, in
 * the keep-a-changelog form), and that the tree has nothing uncommitted, so
 * the commit the packages name is the whole of what they carry.
 *
 *   tsx scripts/build/release-checks.ts VERSION   (exit 0, or 1 naming every problem)
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CRIDOCK_VERSION } from "../../src/version.ts";

/** semver.org 2.0.0: MAJOR.MINOR.PATCH without leading zeros, an optional pre-release and build metadata. */
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export function isSemver(version: string): boolean {
  return version.length <= 128 && SEMVER.test(version);
}

/** Whether `date` is a real calendar day written YYYY-MM-DD. */
function isDay(date: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return false;
  const parsed = new Date(`${date}T00:00:00Z`);
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === date;
}

export type ChangelogEntry = { date: string; body: string } | { problem: string };

/** The entry of `version` in a keep-a-changelog file: its date and text, or what is wrong with it. */
export function changelogEntry(changelog: string, version: string): ChangelogEntry {
  const lines = changelog.split("\n");
  const heading = `## [${version}]`;
  const at = lines.findIndex((line) => line === heading || line.startsWith(`${heading} `));
  if (at < 0) return { problem: `CHANGELOG.md has no "## [${version}] - YYYY-MM-DD" entry` };
  const date = /^ - (.*)$/.exec(lines[at]!.slice(heading.length))?.[1]?.trim();
  if (date === undefined || !isDay(date)) return { problem: `CHANGELOG.md's entry for ${version} has no release date ("## [${version}] - YYYY-MM-DD")` };
  const next = lines.findIndex((line, i) => i > at && /^## /.test(line));
  const body = lines.slice(at + 1, next < 0 ? undefined : next).join("\n").trim();
  if (!/^\s*[-*] \S/m.test(body)) return { problem: `CHANGELOG.md's entry for ${version} lists no change` };
  return { date, body };
}

export interface ReleaseState {
  version: string;
  /** package.json's "version". */
  packageVersion: string;
  /** src/version.ts's CRIDOCK_VERSION. */
  sourceVersion: string;
  changelog: string;
  /** `git status --porcelain`: empty when nothing is uncommitted. */
  gitStatus: string;
}

/** Every reason not to release `state.version` from this tree; empty when it may be. */
export function releaseProblems(state: ReleaseState): string[] {
  const { version } = state;
  if (!isSemver(version)) return [`${JSON.stringify(version.slice(0, 80))} is not a semantic version (MAJOR.MINOR.PATCH, as 0.2.0 or 1.0.0-rc.1)`];
  const problems: string[] = [];
  if (state.packageVersion !== version) problems.push(`package.json's version is ${state.packageVersion}, not ${version}`);
  if (state.sourceVersion !== version) problems.push(`src/version.ts's CRIDOCK_VERSION is ${state.sourceVersion}, not ${version}`);
  const entry = changelogEntry(state.changelog, version);
  if ("problem" in entry) problems.push(entry.problem);
  const changed = state.gitStatus.split("\n").filter((line) => line.trim() !== "");
  if (changed.length > 0) {
    const shown = changed.slice(0, 5).map((line) => line.trim()).join(", ");
    problems.push(`the tree has changes no commit holds (${shown}${changed.length > 5 ? `, and ${changed.length - 5} more` : ""}): commit or remove them`);
  }
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  if (args.length !== 1) {
    console.error("usage: tsx scripts/build/release-checks.ts VERSION");
    process.exit(2);
  }
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const problems = releaseProblems({
    version: args[0]!,
    packageVersion: (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version,
    sourceVersion: CRIDOCK_VERSION,
    changelog: readFileSync(join(root, "CHANGELOG.md"), "utf8"),
    gitStatus: execFileSync("git", ["-C", root, "status", "--porcelain"], { encoding: "utf8" }),
  });
  for (const problem of problems) console.error(`release: ${problem}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
