/**
 * Counts from the JUnit report Ginkgo writes (-ginkgo.junit-report). Each
 * spec is a <testcase> whose `status` attribute says how it ended; specs
 * that the focus or skip lists left out appear as "skipped".
 */

export interface SpecCounts {
  passed: number;
  failed: number;
  skipped: number;
  /** Names of the failed specs, for the summary. */
  failures: string[];
}

const FAILED_STATES = new Set(["failed", "panicked", "interrupted", "aborted", "timedout"]);

function decodeXml(text: string): string {
  return text
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, "&");
}

function attribute(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}="([^"]*)"`).exec(tag);
  return m ? decodeXml(m[1]!) : undefined;
}

/** Ginkgo reports its suite-level setup nodes as testcases too ("[BeforeSuite]", "[SynchronizedBeforeSuite]"). */
const SUITE_NODE = /^\[(Synchronized)?(Before|After)Suite\]/;

/** Each spec's name and how it ended, in report order; suite nodes are marked. */
function testcases(xml: string): { name: string; status: string; suiteNode: boolean }[] {
  return [...xml.matchAll(/<testcase\b[^>]*>/g)].map((m) => {
    const name = attribute(m[0], "name") ?? "";
    return { name, status: attribute(m[0], "status") ?? "", suiteNode: SUITE_NODE.test(name) };
  });
}

export function countJunit(xml: string): SpecCounts {
  const counts: SpecCounts = { passed: 0, failed: 0, skipped: 0, failures: [] };
  for (const { name, status, suiteNode } of testcases(xml)) {
    if (status === "passed") {
      if (!suiteNode) counts.passed++;
    } else if (FAILED_STATES.has(status)) {
      counts.failed++;
      counts.failures.push(name);
    } else {
      if (!suiteNode) counts.skipped++;
    }
  }
  return counts;
}

/** The names of the specs that passed ("[It] [k8s.io] ..."), suite nodes left out. */
export function passedSpecs(xml: string): string[] {
  return testcases(xml)
    .filter((c) => c.status === "passed" && !c.suiteNode)
    .map((c) => c.name);
}

/** Ginkgo's closing line, "Ran 2 of 151 Specs ... SUCCESS! -- 2 Passed | 0 Failed | 0 Pending | 149 Skipped", as a fallback. */
export function countSummaryLine(output: string): SpecCounts | null {
  const m = /(\d+) Passed \| (\d+) Failed \| \d+ Pending \| (\d+) Skipped/.exec(output);
  if (!m) return null;
  return { passed: Number(m[1]), failed: Number(m[2]), skipped: Number(m[3]), failures: [] };
}
