/**
 * Keeps the manual honest: every relative link and #anchor in README.md and
 * docs/**\/*.md resolves (anchors by GitHub's heading slugs), every repo
 * file or npm script a code block's command names exists, and every results
 * table in the docs is what scripts/docs/results-tables.ts writes from
 * docs/results/ (its --check).
 */
import t from "tap";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readRuns, recordResult, runProblem, type ResultRun } from "../../scripts/bench/lib/results.ts";
import { docFiles, latestRuns, renderRuns, rewriteDoc, updateDocs } from "../../scripts/docs/results-tables.ts";
import { timingRow, timingRows } from "../../scripts/suite/timings.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The text outside fenced code blocks, and the fenced blocks' lines, of a Markdown file. */
export function splitFences(text: string): { prose: string[]; code: string[] } {
  const prose: string[] = [];
  const code: string[] = [];
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m && (fence === undefined || line.trim().startsWith(fence))) {
      fence = fence === undefined ? m[1] : undefined;
      continue;
    }
    (fence === undefined ? prose : code).push(line);
  }
  return { prose, code };
}

/** GitHub's slug of a heading: inline code and link syntax dropped, lower case, punctuation dropped, each space a '-'. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors a Markdown file's headings make, with GitHub's -1, -2 … for repeats. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of splitFences(text).prose) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The link targets of a Markdown file's prose (inline code spans left out). */
export function linksOf(text: string): string[] {
  const targets: string[] = [];
  for (const line of splitFences(text).prose) {
    const bare = line.replace(/`[^`]*`/g, "");
    for (const m of bare.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(m[1]!);
  }
  return targets;
}

/** Why a link from FILE does not resolve, or undefined when it does (external links are not checked). */
export function brokenLink(file: string, target: string, anchorsFor: (path: string) => Set<string>): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  const hash = target.indexOf("#");
  const path = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const dest = path === "" ? file : resolve(dirname(file), decodeURIComponent(path));
  if (!existsSync(dest)) return `${target}: no such file`;
  if (anchor === undefined) return undefined;
  if (!dest.endsWith(".md") || statSync(dest).isDirectory()) return `${target}: an anchor into a file that is not Markdown`;
  if (!anchorsFor(dest).has(anchor)) return `${target}: no heading makes #${anchor}`;
  return undefined;
}

/** What a command line of a code block names in the repository: files (scripts/…, test/…, bash X) and npm scripts. */
export function namedInCommand(line: string): { files: string[]; npmScripts: string[] } {
  const command = line.replace(/\s#.*$/, "");
  const files = new Set<string>();
  for (const m of command.matchAll(/(?:^|[\s(=])(?:\.\/)?((?:scripts|test|packaging|proto|bin|src)\/[A-Za-z0-9_./-]*[A-Za-z0-9_-])/g)) files.add(m[1]!);
  for (const m of command.matchAll(/\b(?:bash|sh|tsx|node)\s+(?:-\S+\s+)*((?:\.\/)?[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)+)/g)) files.add(m[1]!.replace(/^\.\//, ""));
  const npmScripts = [...command.matchAll(/\bnpm run ([a-z0-9:_-]+)/g)].map((m) => m[1]!);
  return { files: [...files], npmScripts };
}

const cache = new Map<string, Set<string>>();
const anchorsFor = (path: string) => {
  let a = cache.get(path);
  if (!a) cache.set(path, (a = anchorsOf(readFileSync(path, "utf8"))));
  return a;
};

t.test("every relative link and anchor in README.md and docs/ resolves", async (t) => {
  const broken: string[] = [];
  for (const file of docFiles(ROOT)) {
    for (const target of linksOf(readFileSync(file, "utf8"))) {
      const why = brokenLink(file, target, anchorsFor);
      if (why) broken.push(`${relative(ROOT, file)}: ${why}`);
    }
  }
  t.same(broken, [], "no broken links");
});

t.test("every repo file and npm script a code block's command names exists", async (t) => {
  const scripts = Object.keys((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts);
  const missing: string[] = [];
  for (const file of docFiles(ROOT)) {
    for (const line of splitFences(readFileSync(file, "utf8")).code) {
      const { files, npmScripts } = namedInCommand(line);
      for (const f of files) if (!existsSync(join(ROOT, f))) missing.push(`${relative(ROOT, file)}: ${f} (in "${line.trim()}")`);
      for (const s of npmScripts) if (!scripts.includes(s)) missing.push(`${relative(ROOT, file)}: npm run ${s} (in "${line.trim()}")`);
    }
  }
  t.same(missing, [], "the commands name what the repository has");
  const readme = splitFences(readFileSync(join(ROOT, "README.md"), "utf8")).code.join("\n");
  t.match(readme, /^bash scripts\/run-cridock\.sh\b/m, "README runs cridock with bash scripts/run-cridock.sh");
  t.match(readme, /^bash scripts\/test\.sh\b/m, "README runs the tests with bash scripts/test.sh");
});

t.test("README.md stays a page read in a minute", async (t) => {
  const lines = readFileSync(join(ROOT, "README.md"), "utf8").trimEnd().split("\n").length;
  t.ok(lines < 100, `README.md has ${lines} lines (under 100)`);
});

t.test("the docs' results tables are what the data gives (results-tables.ts --check)", async (t) => {
  const { stale, missing } = updateDocs(true);
  t.same(stale, [], "no table differs from docs/results/ (run tsx scripts/docs/results-tables.ts)");
  t.same(missing, [], "every table has its data");
  for (const file of docFiles(ROOT)) {
    for (const m of readFileSync(file, "utf8").matchAll(/<!-- results-table: ([a-z0-9-]+) -->/g)) {
      t.ok(readRuns(join(ROOT, "docs/results", `${m[1]}.jsonl`)).length > 0, `${m[1]} has at least one run`);
    }
  }
});

t.test("the checks see a violation when there is one", async (t) => {
  t.equal(slug("Checking a node: `cridock check`"), "checking-a-node-cridock-check");
  t.equal(slug("cgroup v2 `unified` keys (`src/runtime/unified-keys.ts`, `src/runtime/container/unified*.ts`)"), "cgroup-v2-unified-keys-srcruntimeunified-keysts-srcruntimecontainerunifiedts");
  t.equal(slug("User namespaces (`hostUsers: false`)"), "user-namespaces-hostusers-false");
  t.same([...anchorsOf("# A\n## B\n```\n# not a heading\n```\n## B\n")], ["a", "b", "b-1"], "repeats are numbered, code is not a heading");
  const doc = join(ROOT, "docs/testing.md");
  t.match(brokenLink(doc, "nowhere.md", anchorsFor) ?? "", /no such file/);
  t.match(brokenLink(doc, "install.md#no-such-heading", anchorsFor) ?? "", /no heading/);
  t.equal(brokenLink(doc, "install.md#building", anchorsFor), undefined);
  t.equal(brokenLink(doc, "#results", anchorsFor), undefined, "an anchor in the same file");
  t.equal(brokenLink(doc, "https://example.com/x#y", anchorsFor), undefined, "external links are left alone");
  t.same(linksOf("see [a](b.md) and `[c](d.md)`\n```\n[e](f.md)\n```\n"), ["b.md"], "code is not a link");
  t.same(namedInCommand("bash scripts/test.sh unit   # run scripts/nothing.sh"), { files: ["scripts/test.sh"], npmScripts: [] }, "comments are not commands");
  t.same(namedInCommand("npm ci && npm run build:deb").npmScripts, ["build:deb"]);
  t.same(namedInCommand("tsx scripts/docs/results-tables.ts --check").files, ["scripts/docs/results-tables.ts"]);
});

t.test("results: runs are validated, recorded only when asked, shown latest first per label", async (t) => {
  const run = (date: string, label?: string): ResultRun => ({
    date, commit: "abc1234", machine: "m", command: "c", ...(label ? { label } : {}), columns: ["x", "y"], rows: [["a", 1]],
  });
  t.equal(runProblem(run("2026-12-04")), undefined);
  t.match(runProblem({ ...run("2026-12-04"), rows: [["a"]] }) ?? "", /does not have 2 cells/);
  t.match(runProblem({ ...run("04.12.2026") }) ?? "", /date/);
  t.match(runProblem({ ...run("2026-12-04"), rows: [["a", Number.NaN]] }) ?? "", /finite/);
  t.same(latestRuns([run("2026-12-01", "warm"), run("2026-12-03", "fresh"), run("2026-12-02", "warm")]).map((r) => r.date), ["2026-12-02", "2026-12-03"]);
  const text = renderRuns([run("2026-12-04")], "results/x.jsonl");
  t.match(text, /2026-12-04, commit `abc1234`, m: `c`\./);
  t.match(text, /\| x \| y \|\n\|---\|---\|\n\| a \| 1 \|/);
  t.match(text, /\[x\.jsonl\]\(results\/x\.jsonl\)/);

  const dir = mkdtempSync(join(tmpdir(), "cridock-docs-test-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(recordResult("x", { command: "c", columns: ["x"], rows: [[1]] }, {}), undefined, "unasked, nothing is written");
  t.equal(existsSync(join(dir, "x.jsonl")), false);
  const file = recordResult("x", { command: "c", columns: ["x"], rows: [[1]] }, { CRIDOCK_RECORD_RESULTS: dir, CRIDOCK_RESULTS_LABEL: "warm", CRIDOCK_RESULTS_MACHINE: "a test" });
  t.equal(file, join(dir, "x.jsonl"));
  const [recorded] = readRuns(file!);
  t.equal(recorded!.label, "warm");
  t.equal(recorded!.machine, "a test");
  t.throws(() => recordResult("../x", { command: "c", columns: ["x"], rows: [[1]] }, { CRIDOCK_RECORD_RESULTS: dir }), /not lower-case/);

  const block = "<!-- results-table: x -->\nold\n<!-- /results-table -->\n";
  const rewritten = rewriteDoc(block, join(dir, "doc.md"), dir);
  t.match(rewritten.text, /\| x \|\n\|---\|\n\| 1 \|/, "the block is rewritten from the data");
  t.same(rewriteDoc("<!-- results-table: none -->\n<!-- /results-table -->\n", join(dir, "doc.md"), dir).missing, ["none"]);
});

t.test("CI's timing lines become rows", async (t) => {
  t.same(timingRow("unit@docker29 191 s"), ["unit@docker29", 191]);
  t.same(timingRow("vm@debian13 537 s, beside the suites before"), ["vm@debian13 (beside the suites before)", 537]);
  t.same(timingRow("kubernetes done in 417 s"), ["background: kubernetes", 417]);
  t.same(timingRow("vm@debian12 not started (4204 s into the run), beside the suites before"), ["vm@debian12", "not started (4204 s into the run), beside the suites before"]);
  t.same(timingRow("the VM suites: 288 s waited for after the host's suites"), ["the VM suites (waited for after the host's suites)", 288]);
  t.same(timingRow("cri-tools (waiting for the build) 12 s"), ["cri-tools (waiting for the build)", 12]);
  t.same(timingRows(["setup 13 s", ""], 2191), [["setup", 13], ["whole run", 2191]]);
});
