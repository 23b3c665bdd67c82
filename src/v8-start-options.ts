/**
 * The V8 options cridock wants in force from its first instruction.
 *
 * The self-contained executable carries them in its SEA configuration's
 * execArgv (scripts/build/binary.ts), so Node starts V8 with them: the
 * young generation is capped before the heap is set up, the optimizing
 * compilers (TurboFan, and Maglev since Node 22) are off for the whole start (the bundle's own module code included), and llhttp's
 * WebAssembly never tiers up. On the other routes (the npm package and the
 * sources through tsx on a Node the operator chose, and Deno) nothing can
 * set them before cridock's code runs, so the modules that need them set
 * them at run time as soon as they can (startup-tiering.ts,
 * young-generation.ts, docker/undici-pool.ts), and skip what the start
 * already did (startedWith).
 */
import process from "node:process";

/** Each semi-space of the young generation at most (MB); both together are young-generation.ts's cap. */
export const SEMI_SPACE_MB = 4;

export const YOUNG_GENERATION_OPTION = `--max-semi-space-size=${SEMI_SPACE_MB}`;
export const NO_TURBOFAN_OPTION = "--no-turbofan";
export const NO_MAGLEV_OPTION = "--no-maglev";
export const LIFTOFF_ONLY_OPTION = "--liftoff-only";

/** The executable's execArgv, in this order. */
export const START_V8_OPTIONS: readonly string[] = [YOUNG_GENERATION_OPTION, NO_TURBOFAN_OPTION, NO_MAGLEV_OPTION, LIFTOFF_ONLY_OPTION];

/** Whether this process was started with `option` (the executable's execArgv, or node's own command line). */
export function startedWith(option: string): boolean {
  return process.execArgv.includes(option);
}
