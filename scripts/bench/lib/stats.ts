/**
 * What the benchmarks share: the median, and reading cridock's step-timer
 * debug lines (src/steps.ts) back out of its log for per-operation figures.
 */

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export interface StepLine {
  operation: string;
  totalMs: number;
  spawned: number;
  steps: Record<string, number>;
  repeats?: Record<string, number>;
}

/** The step summaries cridock logged at debug level ("<operation> steps" lines). */
export function stepLines(log: string): StepLine[] {
  const lines: StepLine[] = [];
  for (const line of log.split("\n")) {
    if (!line.includes(' steps"')) continue;
    try {
      const parsed = JSON.parse(line) as Partial<StepLine>;
      if (typeof parsed.operation === "string" && parsed.steps) lines.push(parsed as StepLine);
    } catch {
      // not a JSON log line
    }
  }
  return lines;
}

/** Processes spawned per operation name, summed over the log's step lines. */
export function spawnedPerOperation(log: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of stepLines(log)) out[line.operation] = (out[line.operation] ?? 0) + line.spawned;
  return out;
}

/** Median milliseconds per step of each operation, over all its step lines. */
export function stepBreakdown(log: string): Record<string, { totalMs: number; spawned: number; steps: Record<string, number> }> {
  const byOp = new Map<string, StepLine[]>();
  for (const line of stepLines(log)) byOp.set(line.operation, [...(byOp.get(line.operation) ?? []), line]);
  const out: Record<string, { totalMs: number; spawned: number; steps: Record<string, number> }> = {};
  for (const [op, lines] of byOp) {
    const names = new Set(lines.flatMap((l) => Object.keys(l.steps)));
    const steps: Record<string, number> = {};
    for (const name of names) steps[name] = Math.round(median(lines.map((l) => l.steps[name] ?? 0)) * 100) / 100;
    out[op] = { totalMs: Math.round(median(lines.map((l) => l.totalMs)) * 100) / 100, spawned: Math.max(...lines.map((l) => l.spawned)), steps };
  }
  return out;
}
