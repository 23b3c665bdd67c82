/**
 * scripts/bench/lib/pods-table.ts: the table kubelet-pods.ts records, a row
 * per figure and a column per arm, with each cridock arm over each other
 * runtime (or, with cridock arms alone, each over the first).
 */
import t from "tap";
import { podsTable, ratioPairs, type ArmFigures } from "../../scripts/bench/lib/pods-table.ts";

const arm = (name: string, cridock: boolean, scale: number, steady = true): ArmFigures => ({
  name,
  cridock,
  allRunningS: 20 * scale,
  p50S: 10 * scale,
  p90S: 18 * scale,
  deletionS: 50 * scale,
  burstCpuS: 5 * scale,
  deleteCpuS: 3 * scale,
  rssIdleMb: 40 * scale,
  rssIdleSplit: { anonymousMb: 10 * scale, ownExecutableMb: 25 * scale, otherFilesMb: 5 * scale },
  rssAfterBurstMb: 40 * scale + 20,
  ...(steady
    ? { steady: { seconds: 60, runtimeCpuS: 4 * scale, engineCpuS: 1, plegRelistMs: 30, summaryMs: 100, listContainersMs: 10, listSandboxesMs: 12, rssHeldMb: 40 * scale + 12 } }
    : {}),
});

t.test("each cridock arm is set over each other runtime", async (t) => {
  const arms = [arm("new", true, 1), arm("old", true, 2), { ...arm("cri-dockerd", false, 2), rssIdleSplit: undefined }];
  t.same(
    ratioPairs(arms).map(([a, b]) => `${a.name}/${b.name}`),
    ["new/cri-dockerd", "old/cri-dockerd"],
  );
  const { columns, rows } = podsTable(110, arms);
  t.same(columns, ["110 pods", "new", "old", "cri-dockerd", "new ÷ cri-dockerd", "old ÷ cri-dockerd"]);
  const row = (label: string) => rows.find((r) => r[0] === label)!;
  t.same(row("RSS idle"), ["RSS idle", "40.0 MB", "80.0 MB", "80.0 MB", 0.5, 1]);
  // An arm measured before the split was recorded shows a dash, and no ratio is made of it.
  t.same(row("RSS idle: anonymous / its own executable's pages / other files"), ["RSS idle: anonymous / its own executable's pages / other files", "10.0 / 25.0 / 5.0 MB", "20.0 / 50.0 / 10.0 MB", "–", "–", "–"]);
  // The target is a size, not a ratio: no ratio is shown.
  t.same(row("RSS added by the 110 pods, held (end of the steady window)"), ["RSS added by the 110 pods, held (end of the steady window)", "12.0 MB", "12.0 MB", "12.0 MB", "–", "–"]);
  t.same(row("the runtime's CPU, burst + deletion"), ["the runtime's CPU, burst + deletion", "5.00 + 3.00 s", "10.00 + 6.00 s", "10.00 + 6.00 s", 0.5, 1]);
  t.same(row("steady 60 s: the runtime's CPU"), ["steady 60 s: the runtime's CPU", "4.00 s", "8.00 s", "8.00 s", 0.5, 1]);
  for (const r of rows) t.equal(r.length, columns.length, `${r[0]} has a cell per column`);
});

t.test("cridock arms alone are each set over the first; no steady window, no steady rows", async (t) => {
  const { columns, rows } = podsTable(30, [arm("shipped", true, 1, false), arm("variant", true, 1.5, false)]);
  t.same(columns, ["30 pods", "shipped", "variant", "variant ÷ shipped"]);
  t.notOk(rows.some((r) => String(r[0]).startsWith("steady")));
  t.same(rows.find((r) => r[0] === "deletion, until every container stopped"), ["deletion, until every container stopped", "50.0 s", "75.0 s", 1.5]);
});

t.test("a Summary API kubelet could not build shows as such, with no ratio", async (t) => {
  const broken = arm("containerd", false, 1);
  broken.steady!.summaryMs = NaN;
  const { rows } = podsTable(110, [arm("cridock", true, 1), broken]);
  t.same(rows.find((r) => r[0] === "Summary API, median"), ["Summary API, median", "100 ms", "kubelet answers an error", "–"]);
});
