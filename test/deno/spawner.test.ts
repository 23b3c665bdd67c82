/**
 * Under Deno, CNI plugins and mounts are spawned from a helper process
 * (`deno eval`), not a worker thread: a worker is a second Deno runtime
 * inside cridock, about 21 MB resident that ending it does not give back.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

const DENO = join(REPO_ROOT, "node_modules/.bin/deno");

// Runs in Deno: one program through the pool, then what the pool and /proc say about where it ran.
const PROBE = `
import { readFileSync } from "node:fs";
import { SpawnerPool } from ${JSON.stringify(join(REPO_ROOT, "src/network/spawner.ts"))};
const pool = new SpawnerPool();
const result = await pool.run({ command: "sh", args: ["-c", "echo ok; echo $PPID"], timeoutMs: 20000 });
const runnerPid = Number(result.stdout.split("\\n")[1]);
const runnerParent = Number(readFileSync("/proc/" + runnerPid + "/stat", "utf8").split(") ")[1].split(" ")[1]);
const runnerArgs = readFileSync("/proc/" + runnerPid + "/cmdline", "utf8").split("\\0").slice(0, 2);
console.log(JSON.stringify({ code: result.code, out: result.stdout.split("\\n")[0], kind: pool.stats().kind, runnerParent, self: process.pid, runnerArgs }));
await pool.close();
`;

t.test("under Deno the spawner's worker is a deno eval helper process, a child of cridock", async (t) => {
  const r = spawnSync(DENO, ["run", "-A", "--no-config", "--ext=ts", "-"], { input: PROBE, encoding: "utf8", timeout: 120_000, cwd: REPO_ROOT });
  t.equal(r.status, 0, r.stderr);
  const got = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
  t.equal(got.code, 0);
  t.equal(got.out, "ok", "the program ran and its output came back");
  t.equal(got.kind, "process");
  t.equal(got.runnerParent, got.self, "the program's parent (the helper) is cridock's child");
  t.equal((got.runnerArgs as string[])[1], "eval", "the helper is deno eval");
});
