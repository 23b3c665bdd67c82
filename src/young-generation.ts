/**
 * Caps V8's young generation at the size cridock's start grows it to.
 *
 * V8 doubles the semi-spaces (the young generation's two halves) whenever
 * a scavenge finds much surviving, up to 16 MB each. A serving cridock
 * allocates in bursts (a 30-pod start, a mass deletion): they grew from 4
 * to 8 MB over a 30-pod burst and to 16 MB over its deletion, and both
 * halves' pages stay resident until V8 shrinks them on an idle
 * notification a serving cridock seldom gets: 8 of the 23 MB an idle
 * cridock gained over the burst, 24 MB after the deletion
 * (bench-kubelet-pods, V8's heap space statistics).
 *
 * node's --max-semi-space-size would cap them, but V8 reads it only when it
 * sets its heap up, before any of cridock's code runs. The growth factor is
 * read at each scavenge: after each collection it is 1 (no growth) while
 * doubling the young generation would pass the cap, and V8's 2 below that,
 * where V8's memory reducer may have shrunk it once idle. What survives a scavenge is
 * promoted to the old generation as before, a little more of it.
 * The executable starts V8 with --max-semi-space-size (v8-start-options.ts),
 * which caps them from the heap's set-up; then there is nothing to do here.
 * Deno ignores node:v8's flags (docs/install.md).
 */
import { PerformanceObserver } from "node:perf_hooks";
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { SEMI_SPACE_MB, YOUNG_GENERATION_OPTION, startedWith } from "./v8-start-options.ts";

/** Both semi-spaces together at most (bytes): 4 MB each, where a cridock start leaves them. */
export const YOUNG_GENERATION_CAP = 2 * SEMI_SPACE_MB * 1024 * 1024;

/** V8's growth factor of the semi-spaces. */
const V8_GROWTH_FACTOR = 2;

let growthFactor = V8_GROWTH_FACTOR;
let observer: PerformanceObserver | undefined;

function youngGenerationSize(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0;
}

/** Sets the growth factor for the young generation's size now. */
function holdAtCap(): void {
  // No growth that would pass the cap: V8 14 (Node 26) starts the young generation at sizes
  // that are not a power-of-two fraction of the cap, so "stop at the cap" overshot it by half.
  const factor = youngGenerationSize() * V8_GROWTH_FACTOR > YOUNG_GENERATION_CAP ? 1 : V8_GROWTH_FACTOR;
  if (factor === growthFactor) return;
  growthFactor = factor;
  setFlagsFromString(`--semi-space-growth-factor=${factor}`);
}

/**
 * From now on the young generation grows no further than the cap
 * (idempotent; nothing on Deno, nor where V8 was started with the cap).
 */
export function capYoungGeneration(): void {
  if (observer || "Deno" in globalThis || startedWith(YOUNG_GENERATION_OPTION)) return;
  holdAtCap();
  observer = new PerformanceObserver(holdAtCap);
  observer.observe({ entryTypes: ["gc"] });
}
