/**
 * The release's checks (scripts/build/release-checks.ts): a semantic
 * version, carried by package.json and src/version.ts, with its CHANGELOG.md
 * entry, from a tree with nothing uncommitted; and scripts/build/release.sh
 * refusing, before it builds anything, a version that fails them. Also the
 * repository's own CHANGELOG.md: it has the current version's entry.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { changelogEntry, isSemver, releaseProblems, type ReleaseState } from "../../../scripts/build/release-checks.ts";
import { CRIDOCK_VERSION } from "../../../src/version.ts";
import { REPO_ROOT } from "../../helpers/cridock-process.ts";

const CHANGELOG = `# Changelog

## [Unreleased]

### Added

- Something not released yet.

## [0.3.0] - 2027-01-15

### Fixed

- A fix.

## [0.2.0] - 2026-12-06

### Added

- **Metrics.** Many.
- More.

## [0.1.1] - 2026-13-01

- A bad date.

## [0.1.0]

- No date at all.

## [0.0.9] - 2026-11-01

Nothing listed, only words.

[0.2.0]: #020
`;

t.test("semantic versions", async (t) => {
  for (const good of ["0.2.0", "1.0.0", "10.20.30", "1.0.0-rc.1", "1.0.0-alpha.beta-2", "1.0.0+build.5", "1.0.0-rc.1+exp.sha.5114f85"]) t.ok(isSemver(good), good);
  for (const bad of ["", "0.2", "v0.2.0", "0.2.0.1", "01.2.0", "0.02.0", "1.0.0-", "1.0.0-01", "1.0.0+", "0.2.0 ", "0.2.0\n", "1.0.0-rc..1", "0.2.0;rm -rf /", "1.0.0-é"]) t.notOk(isSemver(bad), JSON.stringify(bad));
});

t.test("a changelog entry: a dated heading with at least one item", async (t) => {
  const entry = changelogEntry(CHANGELOG, "0.2.0");
  if (!t.ok("body" in entry, JSON.stringify(entry)) || !("body" in entry)) return;
  t.equal(entry.date, "2026-12-06");
  t.match(entry.body, /^### Added\n\n- \*\*Metrics\.\*\* Many\.\n- More\.$/, "the body ends at the next version's heading");
  t.ok("body" in changelogEntry(CHANGELOG, "0.3.0"), "the newest entry, below [Unreleased]");
  t.match(changelogEntry(CHANGELOG, "0.4.0"), { problem: /has no "## \[0\.4\.0\] - YYYY-MM-DD" entry/ });
  t.match(changelogEntry(CHANGELOG, "0.1.1"), { problem: /no release date/ }, "2026-13-01 is no day");
  t.match(changelogEntry(CHANGELOG, "0.1.0"), { problem: /no release date/ });
  t.match(changelogEntry(CHANGELOG, "0.0.9"), { problem: /lists no change/ });
  t.match(changelogEntry(CHANGELOG, "0.2"), { problem: /no "## \[0\.2\]/ }, "a prefix of a version is not its entry");
  t.match(changelogEntry(CHANGELOG, "Unreleased"), { problem: /no release date/ });
});

t.test("what refuses a release", async (t) => {
  const ok: ReleaseState = { version: "0.2.0", packageVersion: "0.2.0", sourceVersion: "0.2.0", changelog: CHANGELOG, gitStatus: "" };
  t.same(releaseProblems(ok), [], "all in order");
  t.same(releaseProblems({ ...ok, gitStatus: "\n" }), [], "an empty status is clean");
  t.match(releaseProblems({ ...ok, version: "v0.2.0" }), [/"v0\.2\.0" is not a semantic version/], "a bad version says only that");
  t.match(releaseProblems({ ...ok, packageVersion: "0.1.0" }), [/package\.json's version is 0\.1\.0, not 0\.2\.0/]);
  t.match(releaseProblems({ ...ok, sourceVersion: "0.1.0" }), [/src\/version\.ts's CRIDOCK_VERSION is 0\.1\.0, not 0\.2\.0/]);
  t.match(releaseProblems({ ...ok, version: "0.4.0", packageVersion: "0.4.0", sourceVersion: "0.4.0" }), [/CHANGELOG\.md has no/]);
  t.match(releaseProblems({ ...ok, gitStatus: " M src/main.ts\n?? notes.txt\n" }), [/changes no commit holds \(M src\/main\.ts, \?\? notes\.txt\)/]);
  const many = Array.from({ length: 8 }, (_, i) => ` M f${i}`).join("\n");
  t.match(releaseProblems({ ...ok, gitStatus: many }), [/f4, and 3 more\)/]);
  t.equal(releaseProblems({ ...ok, version: "0.4.0", gitStatus: "?? x" }).length, 4, "every problem is named at once");
});

t.test("this repository's CHANGELOG.md has the current version's entry", async (t) => {
  const changelog = readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8");
  t.ok("body" in changelogEntry(changelog, CRIDOCK_VERSION), `## [${CRIDOCK_VERSION}] is there, dated, with items`);
  t.match(changelog, /^## \[Unreleased\]$/m, "and an [Unreleased] section for what lands next");
});

t.test("release.sh refuses before it builds", async (t) => {
  const release = (version: string) => spawnSync("bash", [join(REPO_ROOT, "scripts/build/release.sh"), version], { cwd: REPO_ROOT, encoding: "utf8", timeout: 120_000 });
  const bad = release("v1");
  t.equal(bad.status, 1, bad.stderr);
  t.match(bad.stderr, /"v1" is not a semantic version/);
  t.match(bad.stderr, /not releasing v1/);
  const other = release("99.0.0");
  t.equal(other.status, 1, other.stderr);
  t.match(other.stderr, /package\.json's version is .*, not 99\.0\.0/);
  t.match(other.stderr, /CHANGELOG\.md has no "## \[99\.0\.0\]/);
  const none = spawnSync("bash", [join(REPO_ROOT, "scripts/build/release.sh")], { encoding: "utf8" });
  t.equal(none.status, 1);
  t.match(none.stderr, /usage: scripts\/build\/release\.sh VERSION/);
});

t.test("a semantic pre-release is packaged under a Debian version that sorts before the release", async (t) => {
  const debian = (v: string) => spawnSync("bash", ["-c", 'source "$1" && cridock_debian_version "$2"', "bash", join(REPO_ROOT, "scripts/build/version-of.sh"), v], { encoding: "utf8" }).stdout.trim();
  t.equal(debian("0.2.0"), "0.2.0");
  t.equal(debian("0.3.0-rc.1"), "0.3.0~rc.1");
  t.equal(debian("1.0.0-alpha-2+b.5"), "1.0.0~alpha-2+b.5", "only the pre-release's own hyphen");
  const sorts = spawnSync("dpkg", ["--compare-versions", debian("0.3.0-rc.1"), "lt", "0.3.0"]);
  if (sorts.error) t.comment("dpkg is not here to compare them");
  else t.equal(sorts.status, 0, "dpkg orders 0.3.0~rc.1 before 0.3.0");
});
