/**
 * The import rules of README's Architecture section, checked on the source
 * tree: arrows point one way, so a backend never learns of CRI and the
 * domain never reaches up into the gRPC or streaming layers.
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
const UPPER = ["cri", "streaming"];

/** Which areas each area must not import ("" is main/config/errors/log at the top). */
function forbidden(from: string): (to: string, toFile: string) => boolean {
  const top = (to: string, toFile: string) => to === "" && /\/(main|config)\.ts$/.test(toFile);
  if (BACKENDS.includes(from)) {
    // logs/ reads Docker's log files and API; nothing else below may reach sideways.
    const sideways = from === "logs" ? ["network", "stats", "store"] : BACKENDS.filter((b) => b !== from);
    return (to, file) => top(to, file) || to.startsWith("runtime") || UPPER.includes(to) || sideways.includes(to);
  }
  if (from.startsWith("runtime")) return (to, file) => top(to, file) || UPPER.includes(to);
  if (from === "streaming") return (to, file) => top(to, file) || to === "cri";
  if (from === "cri") return (to, file) => top(to, file);
  return () => false;
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
  t.same(violations, [], "src/ follows README's import rules");
});

t.test("the check sees a violation when there is one", async (t) => {
  t.ok(forbidden("docker")("runtime/sandbox", join(SRC, "runtime/sandbox/manager.ts")));
  t.ok(forbidden("runtime/image")("cri", join(SRC, "cri/server.ts")));
  t.ok(forbidden("streaming")("cri", join(SRC, "cri/server.ts")));
  t.ok(forbidden("cri")("", join(SRC, "main.ts")));
  t.notOk(forbidden("cri")("runtime/sandbox", join(SRC, "runtime/sandbox/manager.ts")));
  t.notOk(forbidden("logs")("docker", join(SRC, "docker/client.ts")));
});
