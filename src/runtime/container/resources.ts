/**
 * CRI Linux resources ⇄ Docker resources.
 *
 * Memory without a swap limit means no swap (swap limit = memory), which is
 * what kubelet's default NoSwap behaviour expects; Docker alone would allow
 * as much swap again. Hugepage limits of 0 (kubelet sends one per page size)
 * are accepted; real hugepage limits and cgroup v2 `unified` settings have no
 * Docker equivalent and are refused by name.
 */
import type { HostConfig, Resources } from "../../docker/types.ts";
import { invalidArgument, unimplemented } from "../../errors.ts";
import type { ResourceSpec } from "./spec.ts";

export const EMPTY_RESOURCES: ResourceSpec = {
  cpuPeriod: 0n,
  cpuQuota: 0n,
  cpuShares: 0n,
  memoryLimitInBytes: 0n,
  memorySwapLimitInBytes: 0n,
  oomScoreAdj: 0n,
  cpusetCpus: "",
  cpusetMems: "",
  hugepageLimits: [],
  unified: {},
};

const CPUSET = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;

function num(value: bigint, field: string, min: bigint, max: bigint = BigInt(Number.MAX_SAFE_INTEGER)): number {
  if (value < min || value > max) throw invalidArgument(`${field} ${value} is outside ${min}..${max}`);
  return Number(value);
}

export function validateResources(r: ResourceSpec): void {
  num(r.cpuPeriod, "cpu_period", 0n, 1_000_000n);
  num(r.cpuQuota, "cpu_quota", -1n);
  num(r.cpuShares, "cpu_shares", 0n, 262_144n);
  num(r.memoryLimitInBytes, "memory_limit_in_bytes", 0n);
  num(r.memorySwapLimitInBytes, "memory_swap_limit_in_bytes", -1n);
  num(r.oomScoreAdj, "oom_score_adj", -1000n, 1000n);
  if (r.cpusetCpus && !CPUSET.test(r.cpusetCpus)) throw invalidArgument(`cpuset_cpus "${r.cpusetCpus}" is not a CPU list`);
  if (r.cpusetMems && !CPUSET.test(r.cpusetMems)) throw invalidArgument(`cpuset_mems "${r.cpusetMems}" is not a node list`);
  const hugepages = r.hugepageLimits.filter((h) => h.limit !== 0n);
  if (hugepages.length > 0) {
    throw unimplemented(`hugepage_limits (${hugepages.map((h) => h.pageSize).join(", ")}) cannot be set through Docker`);
  }
  const unified = Object.keys(r.unified);
  if (unified.length > 0) throw unimplemented(`unified cgroup settings (${unified.join(", ")}) cannot be set through Docker`);
}

/** Docker resources for create and update (oom_score_adj is set separately: update cannot change it). */
export function dockerResources(r: ResourceSpec): Resources {
  const out: Resources = {};
  if (r.cpuPeriod > 0n) out.CpuPeriod = Number(r.cpuPeriod);
  if (r.cpuQuota !== 0n) out.CpuQuota = Number(r.cpuQuota);
  if (r.cpuShares > 0n) out.CpuShares = Number(r.cpuShares);
  if (r.memoryLimitInBytes > 0n) {
    out.Memory = Number(r.memoryLimitInBytes);
    out.MemorySwap = r.memorySwapLimitInBytes !== 0n ? Number(r.memorySwapLimitInBytes) : out.Memory;
  } else if (r.memorySwapLimitInBytes !== 0n) {
    throw invalidArgument("memory_swap_limit_in_bytes needs memory_limit_in_bytes");
  }
  if (r.cpusetCpus) out.CpusetCpus = r.cpusetCpus;
  if (r.cpusetMems) out.CpusetMems = r.cpusetMems;
  return out;
}

/** The resources a container runs with, as Docker reports them. */
export function resourcesFromHostConfig(h: HostConfig | undefined): ResourceSpec {
  if (!h) return { ...EMPTY_RESOURCES };
  return {
    ...EMPTY_RESOURCES,
    cpuPeriod: BigInt(h.CpuPeriod ?? 0),
    cpuQuota: BigInt(h.CpuQuota ?? 0),
    cpuShares: BigInt(h.CpuShares ?? 0),
    memoryLimitInBytes: BigInt(h.Memory ?? 0),
    memorySwapLimitInBytes: BigInt(h.MemorySwap ?? 0),
    oomScoreAdj: BigInt(h.OomScoreAdj ?? 0),
    cpusetCpus: h.CpusetCpus ?? "",
    cpusetMems: h.CpusetMems ?? "",
  };
}

/**
 * What UpdateContainerResources sends to Docker. Docker cannot change
 * oom_score_adj of a running container, so a different value is refused.
 */
export function updateFor(requested: ResourceSpec, current: HostConfig): Resources {
  validateResources(requested);
  // 0 means "not given" in CRI (crictl update sends only what the user named).
  if (requested.oomScoreAdj !== 0n && requested.oomScoreAdj !== BigInt(current.OomScoreAdj ?? 0)) {
    throw unimplemented(
      `oom_score_adj cannot be changed on a created container through Docker (it is ${current.OomScoreAdj ?? 0}, ${requested.oomScoreAdj} was asked)`,
    );
  }
  // Fields left at 0 keep their current values: Docker's update leaves unset fields alone.
  return dockerResources(requested);
}

export function hostResources(r: ResourceSpec | undefined): Partial<HostConfig> {
  if (!r) return {};
  validateResources(r);
  const out: Partial<HostConfig> = dockerResources(r);
  if (r.oomScoreAdj !== 0n) out.OomScoreAdj = Number(r.oomScoreAdj);
  return out;
}
