/**
 * The import rules of docs/architecture.md, checked on the source tree:
 * the areas of src/ stand in rows from the entry down to the shared files,
 * and every import points down, with no exception: a backend never learns
 * of CRI, the domain never reaches up into the gRPC, streaming or
 * Prometheus layers, nothing imports the entry (main.ts), and the import
 * graph has no cycle.
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/**
 * The areas of src/ from the top down. A file may import its own area and
 * the areas of the rows below its own, never a row above it (that arrow
 * points up) nor another area of its own row (sideways). The top-level
 * files other than the entries and config.ts are "shared": the bottom row,
 * read by every area and importing none.
 */
const LAYERS: readonly (readonly string[])[] = [
  // main.ts wires everything; executable.ts, the self-contained executable's entry, runs it.
  ["entry"],
  // `cridock check`; metrics/, the Prometheus server and the CRI handler wrapper (it reads cri/).
  ["check", "metrics"],
  // config.ts: the parsed flags, which check/ and metrics/ read and the server's layers are handed.
  ["config"],
  ["cri"],
  ["streaming"],
  // runtime/*.ts and its concern folders (sandbox/, container/, image/, exec/), which read each other.
  ["runtime"],
  // The backends, which know nothing of CRI and nothing of each other; oci/ is cridock's own
  // runtime in front of runc, reading dockerd's answers as logs/ reads its log files.
  ["oci", "logs", "network", "stats", "store", "systemd"],
  // The Engine API client, the one backend others build on (see ONLY_BELOW).
  ["docker"],
  ["shared"],
];

/** Areas that, of the rows below them, may import only these (and the shared files). */
const ONLY_BELOW: Readonly<Record<string, readonly string[]>> = {
  oci: ["docker"],
  logs: ["docker"],
  network: [],
  stats: [],
  store: [],
  systemd: [],
};

/** The top-level files that are not shared by all: the entries and the flags. */
const TOP_FILES: Readonly<Record<string, string>> = { "main.ts": "entry", "executable.ts": "entry", "config.ts": "config" };

/** The area a file belongs to: its top folder of src/ (runtime/ split by concern), or what TOP_FILES says of a src/*.ts. */
function areaOf(file: string): string {
  const parts = relative(SRC, file).split("/");
  if (parts.length === 1) return TOP_FILES[parts[0]!] ?? "shared";
  if (parts[0] === "runtime" && parts.length > 2) return `runtime/${parts[1]}`;
  return parts[0]!;
}

/** The row of LAYERS an area sits in (runtime/sandbox in runtime's), or -1 for an area it does not name. */
function rowOf(area: string): number {
  const top = area.split("/")[0]!;
  return LAYERS.findIndex((row) => row.includes(top));
}

/** Whether a file of area `from` must not import one of area `to`. */
function forbidden(from: string, to: string): boolean {
  const [fromTop, toTop] = [from.split("/")[0]!, to.split("/")[0]!];
  if (fromTop === toTop) return false;
  const [fromRow, toRow] = [rowOf(from), rowOf(to)];
  // An area LAYERS does not place has no rule yet: every import into or out of it is refused until it does.
  if (fromRow < 0 || toRow < 0) return true;
  if (toRow <= fromRow) return true;
  const only = ONLY_BELOW[fromTop];
  return only !== undefined && toTop !== "shared" && !only.includes(toTop);
}

/** Every import of `graph` that breaks the rules, as "<file> imports <file>" relative to src/. */
function violations(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  for (const [file, targets] of graph) {
    for (const target of targets) {
      if (forbidden(areaOf(file), areaOf(target))) found.push(`${relative(SRC, file)} imports ${relative(SRC, target)}`);
    }
  }
  return found;
}

/** Relative imports of one file, resolved to absolute paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => resolve(dirname(file), m[1]!));
}

/** The import graph of src/: each file and the files it imports (static, dynamic and type-only alike). */
function importGraph(): Map<string, string[]> {
  return new Map(sourceFiles(SRC).map((file) => [file, importsOf(file)]));
}

/** Sets of files that import each other, directly or round a loop (Tarjan's strongly connected components). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

t.test("every area of src/ has its row", async (t) => {
  const unplaced = [...new Set(sourceFiles(SRC).map(areaOf))].filter((area) => rowOf(area) < 0);
  t.same(unplaced, [], "a new folder of src/ is given its place in LAYERS");
});

t.test("no import points up or sideways across the layers", async (t) => {
  t.same(violations(importGraph()), [], "src/ follows docs/architecture.md's import rules");
});

t.test("no two modules import each other, directly or round a loop", async (t) => {
  const loops = cycles(importGraph()).map((c) => c.map((f) => relative(SRC, f)));
  t.same(loops, [], "the import graph of src/ has no cycle");
});

t.test("the check sees a violation when there is one", async (t) => {
  const at = (path: string) => join(SRC, path);
  // The upward import this rule once let through: oci/ reaching into runtime/ for the unified key syntax.
  t.same(
    violations(new Map([[at("oci/spec-edits.ts"), [at("runtime/unified-keys.ts"), at("cgroup-unified-keys.ts"), at("docker/client.ts")]]])),
    ["oci/spec-edits.ts imports runtime/unified-keys.ts"],
    "an oci/ file importing a runtime/ file is reported; the shared syntax and the Docker client are not",
  );
  t.same(violations(new Map([[at("errors.ts"), [at("runtime/labels.ts")]]])), ["errors.ts imports runtime/labels.ts"], "a shared file imports no area");
  t.same(violations(new Map([[at("docker/client.ts"), [at("stats/cgroups.ts")]]])), ["docker/client.ts imports stats/cgroups.ts"], "the Docker client builds on no other backend");
  t.same(violations(new Map([[at("newarea/thing.ts"), [at("log.ts")]]])), ["newarea/thing.ts imports log.ts"], "an area with no row is refused");
  t.equal(areaOf(at("runtime/container/unified.ts")), "runtime/container");
  t.equal(areaOf(at("runtime/labels.ts")), "runtime");
  t.equal(areaOf(at("main.ts")), "entry");
  t.equal(areaOf(at("config.ts")), "config");
  t.equal(areaOf(at("cgroup-unified-keys.ts")), "shared");
  t.ok(forbidden("docker", "runtime/sandbox"));
  t.ok(forbidden("runtime/image", "cri"));
  t.ok(forbidden("streaming", "cri"));
  t.ok(forbidden("cri", "entry"));
  t.ok(forbidden("cri", "config"), "the server's layers are handed their flags, they do not read config.ts");
  t.notOk(forbidden("cri", "runtime/sandbox"));
  t.notOk(forbidden("runtime/container", "runtime/sandbox"), "runtime's concerns read each other");
  t.notOk(forbidden("runtime/sandbox", "oci"));
  t.notOk(forbidden("logs", "docker"));
  t.ok(forbidden("docker", "logs"));
  t.ok(forbidden("oci", "network"), "oci/ builds on the Docker client alone");
  t.ok(forbidden("network", "docker"), "nor does CNI know Docker");
  // The arrows that once ran the wrong way.
  t.ok(forbidden("check", "entry"), "check/ importing main.ts");
  t.ok(forbidden("runtime", "metrics"), "runtime/ importing metrics/");
  t.ok(forbidden("cri", "metrics"), "cri/ importing metrics/");
  t.ok(forbidden("oci", "runtime"), "oci/ importing runtime/");
  t.notOk(forbidden("check", "shared"), "anyone may read version.ts");
  t.notOk(forbidden("metrics", "cri"), "metrics/ wraps the CRI handlers");
  t.notOk(forbidden("metrics", "config"));
  const a = at("a.ts");
  const b = at("b.ts");
  const c = at("c.ts");
  t.same(cycles(new Map([[a, [b]], [b, [c]], [c, [a]]])).length, 1, "a loop of three is a cycle");
  t.same(cycles(new Map([[a, [b]], [b, [c]], [c, []]])), [], "a chain is not");
});
