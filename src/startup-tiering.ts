/**
 * Keeps V8's optimizing compilers (Maglev and TurboFan) out of cridock's
 * start, and lets them work again once cridock serves.
 *
 * Starting runs a lot of code once: the module graph, the CRI proto's
 * parse, the service definitions, recovery. V8 optimizes what runs hot
 * even once, so an idle cridock used to carry optimized code of its own
 * start, the compiler's pages of the node executable that doing it touched,
 * and what its background thread's allocator kept: about 2.5 MB of an idle
 * RSS of 62 (bench-idle's figure; scripts/bench/idle.ts). Deferred, the
 * code that turns hot while cridock serves (the log conversion, Docker's
 * answers, gRPC) is still optimized as before: the flag is read at each
 * tiering decision, so a function run during the start is optimized once
 * it is hot later. Imported first by main.ts, so the flag is off before any
 * other module's code runs; the executable starts V8 with it already off
 * (v8-start-options.ts), before the bundle's first module. Deno ignores
 * node:v8's flags (docs/install.md).
 */
import { setFlagsFromString } from "node:v8";
import { NO_MAGLEV_OPTION, NO_TURBOFAN_OPTION, startedWith } from "./v8-start-options.ts";

// Both optimizing tiers: since V8 12 (Node 22) Maglev, the mid tier, optimizes what runs hot
// when TurboFan is off, and did so for cridock's start (test/unit/startup-tiering.test.ts).
for (const option of [NO_TURBOFAN_OPTION, NO_MAGLEV_OPTION]) {
  if (!startedWith(option)) setFlagsFromString(option);
}
let resumed = false;

/** Maglev and TurboFan again, as V8 runs by default; once cridock serves (idempotent). */
export function resumeOptimizingCompiler(): void {
  if (resumed) return;
  resumed = true;
  setFlagsFromString("--maglev");
  setFlagsFromString("--turbofan");
}
