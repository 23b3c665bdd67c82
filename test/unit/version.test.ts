/**
 * One version number: src/version.ts (what --version prints, what the
 * executable and the packages are named after) and package.json agree.
 * --version prints it with the commit: the one a build baked in
 * (scripts/build/bundle.ts), else git's for a checkout of its own, else
 * "unknown".
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CRIDOCK_VERSION, cridockCommit, gitCommit, UNKNOWN_COMMIT, validCommit, versionLine } from "../../src/version.ts";
import { main } from "../../src/main.ts";
import { buildCommit } from "../../scripts/build/bundle.ts";
import { versionLinePattern } from "../helpers/version-line.ts";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

const A = "0123456789abcdef0123456789abcdef01234567";

t.test("src/version.ts and package.json carry the same version, a semantic one", async (t) => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };
  t.equal(CRIDOCK_VERSION, pkg.version);
  t.match(CRIDOCK_VERSION, /^\d+\.\d+\.\d+$/);
});

t.test("--version prints the version and the commit", async (t) => {
  const written: string[] = [];
  const codes: number[] = [];
  const write = process.stdout.write.bind(process.stdout);
  // tap reports on stdout too: only the calls' own output is captured.
  process.stdout.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stdout.write;
  try {
    codes.push(await main(["--version"]));
    codes.push(await main(["check", "--version"]));
  } finally {
    process.stdout.write = write;
  }
  t.same(codes, [0, 0]);
  const line = `${versionLine()}\n`;
  t.same(written, [line, line], "cridock and cridock check say the same");
  // Run from the sources, the commit is git's when they are a checkout (as in CI), else unknown.
  const checkout = gitCommit(REPO_ROOT);
  t.match(line, versionLinePattern(CRIDOCK_VERSION, { commitKnown: checkout !== undefined }));
  t.equal(cridockCommit(), checkout ?? UNKNOWN_COMMIT, "the commit is this checkout's");
});

t.test("the line renders version and commit", async (t) => {
  t.equal(versionLine("0.2.0", A), `cridock 0.2.0 (commit ${A})`);
  t.equal(versionLine("1.0.0", `${A}-dirty`), `cridock 1.0.0 (commit ${A}-dirty)`);
  t.equal(versionLine("0.2.0", UNKNOWN_COMMIT), "cridock 0.2.0 (commit unknown)");
  t.match(`${versionLine("0.2.0", A)}\n`, versionLinePattern("0.2.0"));
  t.notMatch(`${versionLine("0.2.0", UNKNOWN_COMMIT)}\n`, versionLinePattern("0.2.0"), "a build must know its commit");
  t.match(`${versionLine("0.2.0", UNKNOWN_COMMIT)}\n`, versionLinePattern("0.2.0", { commitKnown: false }));
});

t.test("only a commit id is taken as a commit", async (t) => {
  t.equal(validCommit(A), A);
  t.equal(validCommit(`${A}-dirty\n`), `${A}-dirty`, "git's newline is trimmed");
  for (const bad of [undefined, "", "unknown", A.slice(0, 12), A.toUpperCase(), `${A}0`, `${A}-clean`, `${A}\n${A}`, `${A}; rm -rf /`]) {
    t.equal(validCommit(bad), undefined, `refused: ${JSON.stringify(bad)}`);
  }
});

t.test("git's commit: of a checkout's top only, -dirty with changes", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cridock-version-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(gitCommit(dir), undefined, "not a checkout");
  t.equal(gitCommit(join(dir, "missing")), undefined, "not even a folder");
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", ...args], { encoding: "utf8", env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" } });
  git("init", "-q");
  writeFileSync(join(dir, "a"), "a\n");
  git("add", "a");
  git("commit", "-q", "-m", "a");
  const head = git("rev-parse", "HEAD").trim();
  t.equal(gitCommit(dir), head);
  writeFileSync(join(dir, "a"), "changed\n");
  t.equal(gitCommit(dir), `${head}-dirty`, "a changed file");
  git("checkout", "-q", "--", "a");
  writeFileSync(join(dir, "new"), "untracked\n");
  t.equal(gitCommit(dir), `${head}-dirty`, "an untracked file is in a build too");
  mkdirSync(join(dir, "sub"));
  t.equal(gitCommit(join(dir, "sub")), undefined, "a folder inside someone else's checkout does not report its commit");
});

t.test("a build bakes in the given commit, git's, or unknown", async (t) => {
  t.equal(buildCommit({ CRIDOCK_BUILD_COMMIT: A }, "/nonexistent"), A);
  t.throws(() => buildCommit({ CRIDOCK_BUILD_COMMIT: "v0.2.0" }, "/nonexistent"), /not a commit id/);
  t.equal(buildCommit({}, "/nonexistent"), UNKNOWN_COMMIT);
  t.equal(buildCommit({}, REPO_ROOT), gitCommit(REPO_ROOT) ?? UNKNOWN_COMMIT);
});
