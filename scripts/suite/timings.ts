/**
 * The run's timings as a results table (docs/results/ci-times.jsonl): the
 * lines scripts/test.sh prints under "time per suite" ("unit@docker29 191 s",
 * "vm@debian13 537 s, beside the suites before", "vm@debian12 not started …")
 * and the background builds' ("prebuild: kubernetes done in 417 s"), turned
 * into rows of step and seconds. Recorded only when CRIDOCK_RECORD_RESULTS
 * asks (scripts/bench/lib/results.ts): a CI run does not write into the repo.
 */
import type { Cell } from "../bench/lib/results.ts";

/** One "NAME N s[, what]" line (or a background step's "STEP done in N s") as [step, seconds or text]. */
export function timingRow(line: string): [string, Cell] {
  const text = line.trim();
  const background = /^(?:prebuild: )?(\S.*?) done in (\d+) s$/.exec(text);
  if (background) return [`background: ${background[1]}`, Number(background[2])];
  const notStarted = /^(\S+) (not started.*)$/.exec(text);
  if (notStarted) return [notStarted[1]!, notStarted[2]!];
  // "NAME N s", "NAME N s, what", and test.sh's "the VM suites: N s waited for after …".
  const timed = /^(.*?):? (\d+) s(?:,? (.*))?$/.exec(text);
  if (timed) return [timed[3] ? `${timed[1]} (${timed[3]})` : timed[1]!, Number(timed[2])];
  return [text, ""];
}

/** The rows of the run's timings table, the whole run's seconds last. */
export function timingRows(lines: readonly string[], runSeconds?: number): Cell[][] {
  const rows: Cell[][] = lines.filter((l) => l.trim() !== "").map((l) => timingRow(l));
  if (runSeconds !== undefined) rows.push(["whole run", runSeconds]);
  return rows;
}
