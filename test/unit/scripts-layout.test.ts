/**
 * The layout of scripts/ (docs/testing.md, "Where the scripts live"): at its
 * top only the commands README.md tells a person to run, everything else in
 * a folder of its concern, and imports (TypeScript `import`, shell `source`)
 * that cross folders only where the layout allows. Running another folder's
 * script (`bash scripts/env/setup.sh`) is a call, not an import, and is
 * allowed anywhere. src/ imports nothing from scripts/ or test/.
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPTS = join(ROOT, "scripts");

/** The folders of scripts/, and the places each one's files may import from besides itself. */
const ALLOWED_IMPORTS: Record<string, readonly string[]> = {
  // The top: test.sh sources the suite runner's parts, cluster.sh and
  // k8s-conformance.sh the cluster's, and all of them the environment's.
  "": ["scripts/env", "scripts/k8s", "scripts/suite"],
  // build-containerd.sh builds a compared runtime into the tools cache with the environment's helpers.
  bench: ["src", "test", "scripts/env"],
  build: ["src"],
  cni: [],
  // The docs' results tables read the results files in the benchmarks' format.
  docs: ["scripts/bench/lib"],
  // The test images take their names and addresses from the tests' contract.
  env: ["test/helpers"],
  k8s: ["scripts/env", "scripts/suite"],
  // An operator's clients of cridock's socket speak the repository's own proto.
  ops: ["src/cri"],
  // The run's timings are recorded in the benchmarks' results format.
  suite: ["scripts/env", "scripts/k8s", "scripts/bench/lib"],
  vm: ["scripts/env"],
};

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? (entry.name === "node_modules" ? [] : filesUnder(path)) : [path];
  });
}

/** What a file imports, resolved to absolute paths: TypeScript's relative imports, shell's sources beside the file. */
function importsOf(file: string, text: string): string[] {
  const targets: string[] = [];
  if (file.endsWith(".ts")) {
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)) targets.push(resolve(dirname(file), m[1]!));
  }
  if (file.endsWith(".sh")) {
    for (const m of text.matchAll(/^\s*(?:source|\.)\s+"\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)\/([^"]+)"/gm)) targets.push(resolve(dirname(file), m[1]!));
    for (const m of text.matchAll(/^\s*(?:source|\.)\s+"\$CRIDOCK_REPO_ROOT\/([^"]+)"/gm)) targets.push(resolve(ROOT, m[1]!));
  }
  return targets;
}

/** The folder of scripts/ a file is in ("" at the top), or undefined outside scripts/. */
function folderOf(file: string): string | undefined {
  const rel = relative(SCRIPTS, file);
  if (rel.startsWith("..")) return undefined;
  const parts = rel.split("/");
  return parts.length === 1 ? "" : parts[0]!;
}

/** Whether a file in scripts/FOLDER may import TARGET (an absolute path). */
function importAllowed(folder: string, target: string): boolean {
  if (folderOf(target) === folder) return true;
  const rel = relative(ROOT, target);
  return (ALLOWED_IMPORTS[folder] ?? []).some((place) => rel === place || rel.startsWith(`${place}/`));
}

t.test("the top of scripts/ holds only what README.md tells a person to run", async (t) => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const entries = readdirSync(SCRIPTS, { withFileTypes: true });
  const unnamed = entries.filter((e) => e.isFile() && !readme.includes(`scripts/${e.name}`)).map((e) => e.name);
  t.same(unnamed, [], "every file at the top of scripts/ is named in README.md (else it belongs in a folder)");
  const folders = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  t.same(folders, Object.keys(ALLOWED_IMPORTS).filter((f) => f !== "").sort(), "the folders are the layout's (a new one needs its rules here and its line in docs/testing.md)");
});

t.test("docs/testing.md gives each folder of scripts/ its line", async (t) => {
  const doc = readFileSync(join(ROOT, "docs/testing.md"), "utf8");
  const section = doc.split(/^## Where the scripts live$/m)[1]?.split(/^## /m)[0];
  if (!t.ok(section, 'docs/testing.md has a "## Where the scripts live" section')) return;
  for (const folder of Object.keys(ALLOWED_IMPORTS).filter((f) => f !== "")) {
    t.match(section!, new RegExp(`^- \`scripts/${folder}/\``, "m"), `scripts/${folder}/ has its line`);
  }
});

t.test("no file of scripts/ imports across folders the layout does not allow", async (t) => {
  const violations: string[] = [];
  for (const file of filesUnder(SCRIPTS)) {
    const folder = folderOf(file)!;
    for (const target of importsOf(file, readFileSync(file, "utf8"))) {
      if (!importAllowed(folder, target)) violations.push(`${relative(ROOT, file)} imports ${relative(ROOT, target)}`);
    }
  }
  t.same(violations, [], "scripts/ follows its layout's import rules");
});

t.test("src/ imports nothing from scripts/ or test/", async (t) => {
  const violations = filesUnder(join(ROOT, "src"))
    .flatMap((file) => importsOf(file, readFileSync(file, "utf8")).map((target) => [file, relative(ROOT, target)] as const))
    .filter(([, rel]) => rel.startsWith("scripts/") || rel.startsWith("test/"))
    .map(([file, rel]) => `${relative(ROOT, file)} imports ${rel}`);
  t.same(violations, [], "the product does not reach into its tooling");
});

t.test("the checks see a violation when there is one", async (t) => {
  const at = (path: string) => join(ROOT, path);
  t.notOk(importAllowed("env", at("scripts/bench/lib/stats.ts")), "the environment importing a benchmark's helper");
  t.notOk(importAllowed("vm", at("scripts/k8s/cluster-common.sh")), "the VM node sourcing the cluster's shell");
  t.notOk(importAllowed("build", at("test/helpers/env.ts")), "the package build importing the tests");
  t.ok(importAllowed("vm", at("scripts/env/common.sh")), "everyone may source the environment's common part");
  t.ok(importAllowed("bench", at("scripts/bench/lib/runtimes.ts")), "a folder imports its own files");
  t.same(
    importsOf(at("scripts/vm/x.sh"), 'source "$(dirname "${BASH_SOURCE[0]}")/../k8s/cluster-common.sh"\n'),
    [at("scripts/k8s/cluster-common.sh")],
    "a shell source is an import",
  );
  t.same(importsOf(at("scripts/vm/x.sh"), 'source "$CRIDOCK_REPO_ROOT/scripts/suite/tap.sh"\n'), [at("scripts/suite/tap.sh")], "so is one named from the repository's root");
  t.same(importsOf(at("scripts/env/x.ts"), 'import { a } from "../bench/lib/stats.ts";\nimport b from "tar-stream";\n'), [at("scripts/bench/lib/stats.ts")], "a package import is not");
});
