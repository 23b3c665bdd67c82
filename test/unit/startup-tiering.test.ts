/**
 * V8's optimizing compiler is off while cridock starts and on again once it
 * serves (src/startup-tiering.ts): a function run hot before
 * resumeOptimizingCompiler() stays unoptimized, and is optimized once it
 * runs hot after. V8's own optimization status tells (--allow-natives-syntax).
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

/** V8's OptimizationStatus bit for code compiled by TurboFan. */
const TURBOFANNED = 1 << 6;

t.test("TurboFan is off from the import until resumeOptimizingCompiler()", async (t) => {
  const script = `
    const { resumeOptimizingCompiler } = await import(${JSON.stringify(join(REPO_ROOT, "src/startup-tiering.ts"))});
    const status = new Function("f", "return %GetOptimizationStatus(f)");
    function hot(x) { let s = 0; for (let i = 0; i < 50; i++) s += (x * i) % 7; return s; }
    const run = () => { let s = 0; for (let i = 0; i < 300000; i++) s += hot(i); return s; };
    run();
    const before = status(hot);
    resumeOptimizingCompiler();
    run();
    process.stdout.write(JSON.stringify({ before, after: status(hot) }));
  `;
  const child = spawnSync(process.execPath, ["--allow-natives-syntax", "--import", "tsx", "--input-type=module", "-e", script], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  t.equal(child.status, 0, `the script ran (${child.stderr})`);
  const { before, after } = JSON.parse(child.stdout) as { before: number; after: number };
  t.equal(before & TURBOFANNED, 0, "a hot function is not optimized while cridock starts");
  t.equal(after & TURBOFANNED, TURBOFANNED, "once resumed, the same function is optimized when hot");
});
