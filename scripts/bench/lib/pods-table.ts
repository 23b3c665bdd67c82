/**
 * The table scripts/bench/kubelet-pods.ts records: one row per figure, one
 * column per runtime arm, then one ratio column for each cridock arm over
 * each other runtime (cri-dockerd, containerd) in the run; in a run of
 * cridock arms alone (start options side by side), each arm over the first.
 * The figures are the ones cridock's cost targets are set in (issue 57:
 * steady CPU, idle RSS, RSS the pods add once held, CPU over the burst and
 * the deletion, all Running and the deletion).
 */
import type { Cell } from "./results.ts";

/** One arm's figures from one burst (a median of rounds when there are several). */
export interface ArmFigures {
  name: string;
  /** A cridock (this tree, another build, Deno), not another runtime in its place. */
  cridock: boolean;
  allRunningS: number;
  p50S: number;
  p90S: number;
  deletionS: number;
  burstCpuS: number;
  deleteCpuS: number;
  rssIdleMb: number;
  /** The idle RSS by backing (MB): what the runtime's own executable keeps resident, beside its anonymous memory. */
  rssIdleSplit?: { anonymousMb: number; ownExecutableMb: number; otherFilesMb: number };
  rssAfterBurstMb: number;
  /** The N pods held: what the node pays while nothing changes. */
  steady?: {
    /** The window's length (s). */
    seconds: number;
    /** The runtime's CPU (process and direct children) over the window (s). */
    runtimeCpuS: number;
    /** dockerd's over the same window (s); 0 for containerd, which is its own engine (its CPU is the runtime's). */
    engineCpuS: number;
    /** kubelet's mean PLEG relist over the window (ms). */
    plegRelistMs: number;
    /** Medians of 5 calls each, after the window (ms). */
    summaryMs: number;
    listContainersMs: number;
    listSandboxesMs: number;
    /** RSS at the end of the steady window (MB): the pods held a while. */
    rssHeldMb: number;
  };
}

interface Figure {
  label: string;
  /** The cell shown for an arm. */
  show: (a: ArmFigures) => string;
  /** The number ratios are taken of; undefined where no ratio means anything. */
  value?: (a: ArmFigures) => number | undefined;
}

const fixed = (x: number | undefined, digits: number, unit: string): string => (x === undefined || !Number.isFinite(x) ? "–" : `${x.toFixed(digits)} ${unit}`);

function figures(pods: number, steadyS: number | undefined): Figure[] {
  const list: Figure[] = [
    { label: "all Running after", show: (a) => fixed(a.allRunningS, 1, "s"), value: (a) => a.allRunningS },
    { label: "start latency p50 / p90", show: (a) => `${a.p50S.toFixed(2)} / ${a.p90S.toFixed(2)} s`, value: (a) => a.p50S },
    { label: "deletion, until every container stopped", show: (a) => fixed(a.deletionS, 1, "s"), value: (a) => a.deletionS },
    {
      label: "the runtime's CPU, burst + deletion",
      show: (a) => `${a.burstCpuS.toFixed(2)} + ${a.deleteCpuS.toFixed(2)} s`,
      value: (a) => a.burstCpuS + a.deleteCpuS,
    },
    { label: "RSS idle", show: (a) => fixed(a.rssIdleMb, 1, "MB"), value: (a) => a.rssIdleMb },
    {
      label: "RSS idle: anonymous / its own executable's pages / other files",
      show: (a) => (a.rssIdleSplit ? `${a.rssIdleSplit.anonymousMb.toFixed(1)} / ${a.rssIdleSplit.ownExecutableMb.toFixed(1)} / ${a.rssIdleSplit.otherFilesMb.toFixed(1)} MB` : "–"),
      value: (a) => a.rssIdleSplit?.anonymousMb,
    },
    { label: `RSS added by the ${pods} pods, just after the burst`, show: (a) => fixed(a.rssAfterBurstMb - a.rssIdleMb, 1, "MB") },
  ];
  if (steadyS === undefined) return list;
  return [
    ...list,
    { label: `RSS added by the ${pods} pods, held (end of the steady window)`, show: (a) => fixed(a.steady && a.steady.rssHeldMb - a.rssIdleMb, 1, "MB") },
    { label: `steady ${steadyS} s: the runtime's CPU`, show: (a) => fixed(a.steady?.runtimeCpuS, 2, "s"), value: (a) => a.steady?.runtimeCpuS },
    {
      label: `steady ${steadyS} s: runtime and engine`,
      show: (a) => fixed(a.steady && a.steady.runtimeCpuS + a.steady.engineCpuS, 2, "s"),
      value: (a) => a.steady && a.steady.runtimeCpuS + a.steady.engineCpuS,
    },
    { label: "kubelet's PLEG relist, mean", show: (a) => fixed(a.steady?.plegRelistMs, 1, "ms"), value: (a) => a.steady?.plegRelistMs },
    {
      label: "ListContainers / ListPodSandbox, medians",
      show: (a) => (a.steady ? `${a.steady.listContainersMs.toFixed(1)} / ${a.steady.listSandboxesMs.toFixed(1)} ms` : "–"),
      value: (a) => a.steady?.listContainersMs,
    },
    { label: "Summary API, median", show: (a) => (a.steady && !Number.isFinite(a.steady.summaryMs) ? "kubelet answers an error" : fixed(a.steady?.summaryMs, 0, "ms")), value: (a) => a.steady?.summaryMs },
  ];
}

/** Which arm is set over which: each cridock arm over each other runtime, or each arm over the first. */
export function ratioPairs(arms: readonly ArmFigures[]): [ArmFigures, ArmFigures][] {
  const others = arms.filter((a) => !a.cridock);
  if (others.length > 0) return arms.filter((a) => a.cridock).flatMap((mine) => others.map((other): [ArmFigures, ArmFigures] => [mine, other]));
  return arms.slice(1).map((a): [ArmFigures, ArmFigures] => [a, arms[0]!]);
}

/** The recorded table: columns and rows. */
export function podsTable(pods: number, arms: readonly ArmFigures[]): { columns: string[]; rows: Cell[][] } {
  const steadyS = arms.find((a) => a.steady)?.steady?.seconds;
  const pairs = ratioPairs(arms);
  const columns = [`${pods} pods`, ...arms.map((a) => a.name), ...pairs.map(([a, b]) => `${a.name} ÷ ${b.name}`)];
  const rows = figures(pods, steadyS).map((f): Cell[] => [
    f.label,
    ...arms.map((a) => f.show(a)),
    ...pairs.map(([a, b]): Cell => {
      const x = f.value?.(a);
      const y = f.value?.(b);
      return x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y) || y <= 0 ? "–" : Number((x / y).toFixed(2));
    }),
  ]);
  return { columns, rows };
}
