/**
 * The resource limits in force for a process, read from its cgroup (v1 or
 * v2), so ContainerStatus reports what the kernel enforces after an
 * in-place resize rather than what was asked for. Values use CRI's
 * conventions: 0 means "no limit / not set". On v2 the caller may name
 * further interface files of the cgroup to read back as they are.
 */
import { readKernelFile } from "./kernel-file.ts";
import { basename, join } from "node:path";
import type { CgroupReader } from "./cgroups.ts";

/** cgroup v1 reports "no limit" as a value at or above the largest page-aligned int64. */
const V1_UNLIMITED = 0x7ffffffffffff000n;

export interface CgroupLimits {
  /** v1: cpu.shares; v2: the shares runc's linear conversion maps to cpu.weight (cpuWeight). */
  cpuShares: bigint;
  /** v2: cpu.weight as the cgroup holds it. */
  cpuWeight?: bigint;
  /** CFS quota in µs per period; 0 when unlimited. */
  cpuQuota: bigint;
  cpuPeriod: bigint;
  /** Bytes; 0 when unlimited. */
  memoryLimit: bigint;
  cpusetCpus: string;
  cpusetMems: string;
  /** 0 when unlimited or the pids controller is absent. */
  pidsLimit: bigint;
  /** v2: the text of each file asked for that the cgroup has. */
  unified?: Record<string, string>;
}

async function text(path: string): Promise<string | undefined> {
  try {
    return (await readKernelFile(path)).trim();
  } catch {
    return undefined;
  }
}

function int(value: string | undefined): bigint | undefined {
  return value !== undefined && /^-?\d+$/.test(value) ? BigInt(value) : undefined;
}

/**
 * cgroup v2 cpu.weight (1..10000) from CPU shares (2..262144), as runc
 * before 1.3.2 converts them: linearly (Debian 12's runc 1.1, Docker 20.10
 * to 28's static packages).
 */
export function sharesToWeight(shares: bigint): bigint {
  if (shares === 0n) return 0n;
  return 1n + ((shares - 2n) * 9999n) / 262142n;
}

/**
 * cpu.weight from CPU shares as runc 1.3.2 and later convert them (Engine
 * 29's runc): 10^((l² + 125·l)/612 − 7/34) rounded up, l = log2(shares), so
 * that 2, 1024 (the default) and 262144 map to 1, 100 (cgroup v2's default)
 * and 10000. Float64 operations in the same order as runc's Go, which gives
 * the same value for every shares value (checked over the whole range).
 */
export function sharesToWeightLog(shares: bigint): bigint {
  if (shares === 0n) return 0n;
  if (shares <= 2n) return 1n;
  if (shares >= 262144n) return 10000n;
  const l = Math.log2(Number(shares));
  return BigInt(Math.ceil(10 ** ((l * l + 125 * l) / 612 - 7 / 34)));
}

/** The smallest shares value that runc turns into this weight. */
export function weightToShares(weight: bigint): bigint {
  if (weight <= 0n) return 0n;
  let shares = 2n + ((weight - 1n) * 262142n + 9998n) / 9999n;
  while (shares > 2n && sharesToWeight(shares - 1n) === weight) shares--;
  return shares;
}

/** Parses v2 cpu.max ("max 100000" or "50000 100000"). */
export function parseCpuMax(value: string): { quota: bigint; period: bigint } {
  const [quota, period] = value.split(/\s+/);
  return { quota: quota === "max" ? 0n : (int(quota) ?? 0n), period: int(period) ?? 0n };
}

/**
 * The limits of the cgroup `pid` is in; undefined when the process is gone.
 * `files`: v2 interface file names (such as memory.high) to read back too;
 * anything that is not a plain file name is skipped.
 */
export async function readCgroupLimits(reader: CgroupReader, pid: number, files: readonly string[] = []): Promise<CgroupLimits | undefined> {
  let paths: Map<string, string>;
  try {
    paths = await reader.cgroupPaths(pid);
  } catch {
    return undefined;
  }
  const root = reader.root;
  if ((await reader.cgroupVersion()) === 2) {
    const dir = join(root, paths.get("") ?? "/");
    const [weight, cpuMax, memMax, cpus, mems, pids] = await Promise.all(
      ["cpu.weight", "cpu.max", "memory.max", "cpuset.cpus", "cpuset.mems", "pids.max"].map((f) => text(join(dir, f))),
    );
    const unified: Record<string, string> = {};
    for (const file of files) {
      if (basename(file) !== file || file.startsWith(".")) continue;
      const value = await text(join(dir, file));
      if (value !== undefined) unified[file] = value;
    }
    const max = cpuMax ? parseCpuMax(cpuMax) : { quota: 0n, period: 0n };
    const cpuWeight = int(weight) ?? 0n;
    return {
      cpuShares: weightToShares(cpuWeight),
      cpuWeight,
      cpuQuota: max.quota,
      cpuPeriod: max.period,
      memoryLimit: memMax === "max" ? 0n : (int(memMax) ?? 0n),
      cpusetCpus: cpus ?? "",
      cpusetMems: mems ?? "",
      pidsLimit: pids === "max" ? 0n : (int(pids) ?? 0n),
      unified,
    };
  }
  const dir = (controller: string) => join(root, controller, paths.get(controller) ?? "/");
  const [shares, quota, period, memLimit, cpus, mems, pids] = await Promise.all([
    text(join(dir("cpu"), "cpu.shares")),
    text(join(dir("cpu"), "cpu.cfs_quota_us")),
    text(join(dir("cpu"), "cpu.cfs_period_us")),
    text(join(dir("memory"), "memory.limit_in_bytes")),
    text(join(dir("cpuset"), "cpuset.cpus")),
    text(join(dir("cpuset"), "cpuset.mems")),
    paths.has("pids") ? text(join(dir("pids"), "pids.max")) : undefined,
  ]);
  const q = int(quota) ?? -1n;
  const m = int(memLimit) ?? 0n;
  return {
    cpuShares: int(shares) ?? 0n,
    cpuQuota: q < 0n ? 0n : q,
    cpuPeriod: int(period) ?? 0n,
    memoryLimit: m >= V1_UNLIMITED ? 0n : m,
    cpusetCpus: cpus ?? "",
    cpusetMems: mems ?? "",
    pidsLimit: pids === "max" ? 0n : (int(pids) ?? 0n),
  };
}
