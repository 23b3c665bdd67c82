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

t.test("Maglev and TurboFan are off from the import until resumeOptimizingCompiler()", async (t) => {
  const script = `
    const { resumeOptimizingCompiler } = await import(${JSON.stringify(join(REPO_ROOT, "src/startup-tiering.ts"))});
    // The tier V8 runs f on (GetOptimizationStatus's bits moved between V8 11 and 14).
    const status = new Function("f", "return %ActiveTierIsMaglev(f) ? 'maglev' : %ActiveTierIsTurbofan(f) ? 'turbofan' : 'unoptimized'");
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
  const { before, after } = JSON.parse(child.stdout) as { before: string; after: string };
  t.equal(before, "unoptimized", "a hot function is not optimized while cridock starts, by neither tier");
  t.not(after, "unoptimized", `once resumed, the same function is optimized when hot (${after})`);
});
