/**
 * What an idle cridock loads at start. Importing src/main.ts builds the whole
 * static module graph (main() is not run); what a node that never serves
 * metrics, never gets a WebSocket stream and never reads an image's
 * /etc/passwd has no use for must not be in it: prom-client, ws and
 * tar-stream load on first use, and of undici only the pool, its request and
 * upgrade calls and their dependencies load, not the index with fetch,
 * WebSocket, caches and mock agents. Together they were about 9 MB of an
 * idle process's resident memory.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

/** The CommonJS modules under node_modules/ loaded once src/main.ts is imported, as package-relative paths. */
function modulesLoadedByMain(): string[] {
  const script = `
    await import(${JSON.stringify(join(REPO_ROOT, "src/main.ts"))});
    const { createRequire } = await import("node:module");
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    process.stdout.write(JSON.stringify(loaded.filter((p) => p.includes("/node_modules/")).map((p) => p.slice(p.lastIndexOf("/node_modules/") + 14))));
  `;
  const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: REPO_ROOT, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  if (run.status !== 0) throw new Error(`importing src/main.ts failed (${run.status}):\n${run.stderr}`);
  return JSON.parse(run.stdout) as string[];
}

t.test("importing cridock loads neither metrics, WebSocket, tar nor undici's index", async (t) => {
  const loaded = modulesLoadedByMain();
  t.ok(loaded.some((p) => p.startsWith("@grpc/grpc-js/")), "the graph was loaded (grpc-js is in it)");
  t.ok(loaded.includes("undici/lib/dispatcher/pool.js"), "undici's pool is loaded");
  for (const pkg of ["prom-client/", "ws/", "tar-stream/"]) {
    t.same(loaded.filter((p) => p.startsWith(pkg)), [], `nothing of ${pkg} is loaded`);
  }
  t.notOk(loaded.includes("undici/index.js"), "undici's index is not loaded");
  t.same(loaded.filter((p) => /^undici\/lib\/(web|mock|cache|interceptor)\//.test(p)), [], "nor fetch, WebSocket, mocks, caches or interceptors");
});
