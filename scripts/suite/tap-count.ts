/**
 * Counts test points in a TAP stream as tap's `--reporter=tap` writes it:
 * subtests are indented and their own result line comes after their
 * children. Leaf points (assertions) are counted; a subtest that failed with
 * no failing child (a crash, a timeout, a plan mismatch) counts as one
 * failure so it cannot pass unnoticed. SKIP and TODO points are neither
 * passed nor failed.
 */

export interface TapCounts {
  passed: number;
  failed: number;
  skipped: number;
  /** Names of failed points, outermost path first ("file > subtest > assertion"). */
  failures: string[];
}

interface Point {
  depth: number;
  ok: boolean;
  directive: "skip" | "todo" | null;
  name: string;
}

const POINT = /^(\s*)(not ok|ok)\b\s*\d*\s*(?:-\s*)?(.*)$/;

function parsePoint(line: string): Point | null {
  const m = POINT.exec(line);
  if (!m) return null;
  const rest = m[3] ?? "";
  // A directive follows an unescaped "#": "ok 3 - name # SKIP reason".
  const hash = /(?<!\\)#\s*(skip|todo)\b/i.exec(rest);
  return {
    depth: m[1]!.replace(/\t/g, "    ").length / 4,
    ok: m[2] === "ok",
    directive: hash ? (hash[1]!.toLowerCase() as "skip" | "todo") : null,
    name: rest.replace(/\s+#\s*time=.*$/, "").replace(/(?<!\\)#\s*(skip|todo)\b.*$/i, "").trim(),
  };
}

export function countTap(text: string): TapCounts {
  const counts: TapCounts = { passed: 0, failed: 0, skipped: 0, failures: [] };
  // reported[d]: for each point at depth d not yet claimed by its parent,
  // whether a failure was counted for it or somewhere beneath it.
  const reported: boolean[][] = [];
  for (const line of text.split("\n")) {
    const point = parsePoint(line);
    if (!point) continue;
    const children = reported[point.depth + 1] ?? [];
    reported[point.depth + 1] = [];
    let failureCounted = children.some(Boolean);
    if (point.directive === "skip") {
      if (children.length === 0) counts.skipped++;
    } else if (point.directive === "todo") {
      // A TODO point may fail by design.
    } else if (children.length === 0) {
      if (point.ok) counts.passed++;
      else {
        counts.failed++;
        counts.failures.push(point.name);
        failureCounted = true;
      }
    } else if (!point.ok && !failureCounted) {
      counts.failed++;
      counts.failures.push(`${point.name} (failed outside its assertions)`);
      failureCounted = true;
    }
    (reported[point.depth] ??= []).push(failureCounted);
  }
  return counts;
}
