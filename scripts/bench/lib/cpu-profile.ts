/**
 * What the benchmarks' --cpu-prof needs: node's flags for a V8 CPU profile
 * of a cridock process, and the clock its samples are on, so a benchmark
 * can print where its phases fall in the profile.
 */

/** node's flags to write a CPU profile into `dir` when the process stops; undefined without a dir. */
export function cpuProfileFlags(dir: string | undefined): string[] | undefined {
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : undefined;
}

/** CLOCK_MONOTONIC in µs: the clock of V8's CPU profiles (their startTime and sample times). */
export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}
