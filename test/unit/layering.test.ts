/**
 * The import rules of docs/architecture.md, checked on the source tree:
 * arrows point one way, so a backend never learns of CRI, the domain never
 * reaches up into the gRPC, streaming or Prometheus layers, nothing imports
 * the entry (main.ts), and the import graph has no cycle.
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

/** The top folder of src/ a file belongs to ("" for src/*.ts), with runtime/ split by concern. */
function areaOf(file: string): string {
  const parts = relative(SRC, file).split("/");
  if (parts.length === 1) return "";
  if (parts[0] === "runtime" && parts.length > 2) return `runtime/${parts[1]}`;
  return parts[0]!;
}

/** Relative imports of one file, resolved to absolute paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => resolve(dirname(file), m[1]!));
}

const BACKENDS = ["docker", "network", "stats", "store", "logs"];
// metrics/ is the Prometheus server and the CRI handler wrapper: it reads the
// domain and the backends, never the other way round.
const UPPER = ["cri", "streaming", "metrics"];

/** Which areas each area must not import ("" is main/config/errors/log/version at the top). */
function forbidden(from: string): (to: string, toFile: string) => boolean {
  const isMain = (to: string, toFile: string) => to === "" && /\/main\.ts$/.test(toFile);
  const top = (to: string, toFile: string) => isMain(to, toFile) || (to === "" && /\/config\.ts$/.test(toFile));
  if (BACKENDS.includes(from)) {
    // logs/ reads Docker's log files and API; nothing else below may reach sideways.
    const sideways = from === "logs" ? ["network", "stats", "store"] : BACKENDS.filter((b) => b !== from);
    return (to, file) => top(to, file) || to.startsWith("runtime") || UPPER.includes(to) || sideways.includes(to);
  }
  // oci/ is the OCI runtime layer (cridock's own runtime in front of runc): a
  // backend that reads dockerd's answers and checks unified keys as the runtime does.
  if (from === "oci") {
    return (to, file) =>
      top(to, file) || UPPER.includes(to) || (to.startsWith("runtime") && !/\/runtime\/unified-keys\.ts$/.test(file)) || ["network", "stats", "store", "logs"].includes(to);
  }
  if (from.startsWith("runtime")) return (to, file) => top(to, file) || UPPER.includes(to);
  if (from === "streaming") return (to, file) => top(to, file) || to === "cri" || to === "metrics";
  if (from === "cri") return (to, file) => top(to, file) || to === "metrics";
  // main.ts imports everything: whoever below it imports it closes a cycle. Only
  // the entries beside it (executable.ts, the self-contained executable's) may.
  if (from !== "") return isMain;
  return () => false;
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

t.test("no import points up or sideways across the layers", async (t) => {
  const violations: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const from = areaOf(file);
    const isForbidden = forbidden(from);
    for (const target of importsOf(file)) {
      if (isForbidden(areaOf(target), target)) violations.push(`${relative(SRC, file)} imports ${relative(SRC, target)}`);
    }
  }
  t.same(violations, [], "src/ follows docs/architecture.md's import rules");
});

t.test("no two modules import each other, directly or round a loop", async (t) => {
  const loops = cycles(importGraph()).map((c) => c.map((f) => relative(SRC, f)));
  t.same(loops, [], "the import graph of src/ has no cycle");
});

t.test("the check sees a violation when there is one", async (t) => {
  t.ok(forbidden("docker")("runtime/sandbox", join(SRC, "runtime/sandbox/manager.ts")));
  t.ok(forbidden("runtime/image")("cri", join(SRC, "cri/server.ts")));
  t.ok(forbidden("streaming")("cri", join(SRC, "cri/server.ts")));
  t.ok(forbidden("cri")("", join(SRC, "main.ts")));
  t.notOk(forbidden("cri")("runtime/sandbox", join(SRC, "runtime/sandbox/manager.ts")));
  t.notOk(forbidden("logs")("docker", join(SRC, "docker/client.ts")));
  // The three arrows that once ran the wrong way.
  t.ok(forbidden("check")("", join(SRC, "main.ts")), "check/ importing main.ts");
  t.ok(forbidden("runtime")("metrics", join(SRC, "metrics/cadvisor.ts")), "runtime/ importing metrics/");
  t.ok(forbidden("cri")("metrics", join(SRC, "metrics/cadvisor.ts")), "cri/ importing metrics/");
  t.notOk(forbidden("check")("", join(SRC, "version.ts")), "anyone may read version.ts");
  t.notOk(forbidden("metrics")("cri", join(SRC, "cri/handlers.ts")), "metrics/ wraps the CRI handlers");
  const a = join(SRC, "a.ts");
  const b = join(SRC, "b.ts");
  const c = join(SRC, "c.ts");
  t.same(cycles(new Map([[a, [b]], [b, [c]], [c, [a]]])).length, 1, "a loop of three is a cycle");
  t.same(cycles(new Map([[a, [b]], [b, [c]], [c, []]])), [], "a chain is not");
});
