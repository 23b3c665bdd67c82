/**
 * CRI Linux resources ⇄ Docker resources.
 *
 * Memory without a swap limit means no swap (swap limit = memory), which is
 * what kubelet's default NoSwap behaviour expects; Docker alone would allow
 * as much swap again. Hugepage limits of 0 (kubelet sends one per page size)
 * are accepted; real hugepage limits have no Docker equivalent and are
 * refused by name. The cgroup v2 `unified` settings go to Docker fields
 * where Docker has them and to the container's own cgroup otherwise
 * (unified.ts says which); their Docker fields replace the CRI fields'.
 */
import type { HostConfig, Resources } from "../../docker/types.ts";
import { internal, invalidArgument, unimplemented } from "../../errors.ts";
import { sharesToWeight, sharesToWeightLog, type CgroupLimits } from "../../stats/cgroup-limits.ts";
import type { CgroupVersion } from "../../stats/cgroups.ts";
import type { ResourceSpec } from "./spec.ts";
import { clampOomScore, type OomScorePolicy } from "./oom-score.ts";
import { validateUnified } from "../../cgroup-unified-keys.ts";
import { PIDS_MAX, planUnified, type UnifiedPlan } from "./unified.ts";

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
  validateUnified(r.unified);
}

/** Docker resources of the CRI fields, for create and update (oom_score_adj is set separately: update cannot change it). */
function criResources(r: ResourceSpec): Resources {
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

/**
 * The Docker resources of the CRI fields and the `unified` keys together
 * (the keys' fields replace the CRI fields', as unified wins in runc), and
 * the keys left for the container's cgroup. `current` is the container's
 * HostConfig on update. The cgroup version is needed only when there are
 * keys (cgroup v1 refuses those Docker cannot carry).
 */
export function dockerResources(r: ResourceSpec, version?: CgroupVersion, current?: Resources): UnifiedPlan {
  const base = criResources(r);
  if (Object.keys(r.unified).length === 0) return { docker: base, files: {} };
  if (!version) throw internal("the cgroup version was not learnt before the unified settings were planned");
  const plan = planUnified(r.unified, base, version, current);
  return { docker: { ...base, ...plan.docker }, files: plan.files };
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
    unified: (h.PidsLimit ?? 0) > 0 ? { [PIDS_MAX]: String(h.PidsLimit) } : {},
  };
}

/**
 * The resources in force: Docker's record, overridden by what the cgroup
 * enforces (the kernel may round, and an update that failed half-way shows
 * here). Cpusets are reported only when one was set (else the cgroup lists
 * every CPU of the node, which is not a limit).
 */
export function resourcesInForce(fromDocker: ResourceSpec, limits: CgroupLimits | undefined): ResourceSpec {
  if (!limits) return fromDocker;
  const out: ResourceSpec = { ...fromDocker, unified: { ...fromDocker.unified } };
  // cgroup v2 stores a weight: keep Docker's shares when runc turned them into it.
  if (limits.cpuWeight !== undefined) {
    if (limits.cpuWeight > 0n && !weightOf(fromDocker.cpuShares, limits.cpuWeight)) out.cpuShares = limits.cpuShares;
  } else if (limits.cpuShares > 0n) out.cpuShares = limits.cpuShares;
  out.cpuQuota = limits.cpuQuota === 0n && fromDocker.cpuQuota < 0n ? fromDocker.cpuQuota : limits.cpuQuota;
  if (limits.cpuPeriod > 0n) out.cpuPeriod = limits.cpuPeriod;
  out.memoryLimitInBytes = limits.memoryLimit;
  if (fromDocker.cpusetCpus && limits.cpusetCpus) out.cpusetCpus = limits.cpusetCpus;
  if (fromDocker.cpusetMems && limits.cpusetMems) out.cpusetMems = limits.cpusetMems;
  if (limits.pidsLimit > 0n) out.unified[PIDS_MAX] = String(limits.pidsLimit);
  else delete out.unified[PIDS_MAX];
  // The keys the container was given, as its cgroup holds them now (cgroup v2).
  for (const [key, text] of Object.entries(limits.unified ?? {})) out.unified[key] = text.trim();
  return out;
}

/** Whether runc, old or new (cgroup-limits.ts), makes this cpu.weight of these shares. */
function weightOf(dockerShares: bigint, weight: bigint): boolean {
  return dockerShares >= 2n && (sharesToWeight(dockerShares) === weight || sharesToWeightLog(dockerShares) === weight);
}

/**
 * What UpdateContainerResources sends to Docker, and the unified keys it
 * writes into the container's cgroup. Docker cannot change oom_score_adj of
 * a running container, so a different value is refused; on a restricted
 * host the value compared is the clamped one, which is what the container
 * was created with (kubelet resends its -997 on every resize of a
 * Guaranteed pod).
 */
export function updateFor(requested: ResourceSpec, current: HostConfig, oomScore?: OomScorePolicy, version?: CgroupVersion): UnifiedPlan {
  validateResources(requested);
  // 0 means "not given" in CRI (crictl update sends only what the user named).
  const asked = requested.oomScoreAdj === 0n ? 0n : BigInt(clampOomScore(Number(requested.oomScoreAdj), oomScore));
  if (requested.oomScoreAdj !== 0n && asked !== BigInt(current.OomScoreAdj ?? 0)) {
    throw unimplemented(
      `oom_score_adj cannot be changed on a created container through Docker (it is ${current.OomScoreAdj ?? 0}, ${requested.oomScoreAdj} was asked)`,
    );
  }
  // Fields left at 0 keep their current values: Docker's update leaves unset fields alone.
  return dockerResources(requested, version, current);
}

/**
 * The resources of a create body. The unified keys Docker cannot carry are
 * not in it: CreateContainer keeps them in a label, and StartContainer
 * writes them into the container's cgroup.
 */
export function hostResources(r: ResourceSpec | undefined, version?: CgroupVersion): Partial<HostConfig> {
  if (!r) return {};
  validateResources(r);
  const out: Partial<HostConfig> = dockerResources(r, version).docker;
  if (r.oomScoreAdj !== 0n) out.OomScoreAdj = Number(r.oomScoreAdj);
  return out;
}
