/**
 * How each cgroup v2 `unified` key of a container is carried out on Docker:
 * through a HostConfig field where Docker has one, else written into the
 * container's own cgroup after it starts (unified-cgroup.ts).
 *
 * The Docker fields, and what runc makes of them on cgroup v2 (libcontainer's
 * fs2 and systemd managers):
 * - `pids.max` → PidsLimit (-1 for "max").
 * - `memory.max` → Memory, from 6 MiB (Docker's floor; runc takes less, so a
 *   smaller value, 0 or "max" is written to the file instead: Docker's update
 *   cannot lift a limit).
 * - `memory.swap.max` → MemorySwap = Memory + swap ("max" → -1), because runc
 *   writes memory.swap.max = MemorySwap − Memory. It needs a memory limit;
 *   without one the file is written.
 * - `memory.low` → MemoryReservation (runc writes the reservation into
 *   memory.low), from 6 MiB as for Memory. On cgroup v1 the reservation is a
 *   soft limit, not a protection, so there the key is refused like a file.
 * - `cpu.max` → CpuQuota ("max" → -1) and CpuPeriod, within Docker's ranges
 *   (quota ≥ 1000 µs, period 1000..1000000 µs); other values go to the file,
 *   where the kernel judges them.
 * - `cpu.weight` is always written to the file: runc turns CpuShares into a
 *   weight with a formula that changed in runc 1.3.2 (linear, then
 *   quadratic), and the Engine API does not say which runc runs, so no shares
 *   value is known to give exactly the weight asked for.
 * Every other key (memory.oom.group, memory.high, memory.min, io.max, …) has
 * no Docker field and is written to the file.
 *
 * Where a unified key and a CRI field both set a limit (unified memory.max
 * beside memory_limit_in_bytes, cpu.max beside cpu_quota), the unified key
 * wins, as in runc, which writes the unified map after every other field.
 */
import type { Resources } from "../../docker/types.ts";
import { invalidArgument, unimplemented } from "../../errors.ts";
import type { CgroupVersion } from "../../stats/cgroups.ts";
import { controllerOf } from "../../cgroup-unified-keys.ts";

export interface UnifiedPlan {
  /** HostConfig resource fields the keys set; they replace what the CRI fields set. */
  docker: Resources;
  /** Keys with no Docker field: written into the container's own cgroup once it runs. */
  files: Record<string, string>;
}

export const PIDS_MAX = "pids.max";
/** Docker refuses memory limits and reservations below 6 MiB. */
const DOCKER_MIN_MEMORY = 6 * 1024 * 1024;
const MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** A decimal within JS's safe integers, or undefined. */
function decimal(value: string): number | undefined {
  return /^\d{1,16}$/.test(value) && BigInt(value) <= MAX ? Number(value) : undefined;
}

/** Bytes Docker's memory fields take (at least 6 MiB), or undefined. */
function dockerBytes(value: string): number | undefined {
  const n = decimal(value);
  return n !== undefined && n >= DOCKER_MIN_MEMORY ? n : undefined;
}

/** cpu.max "quota [period]" as Docker's CpuQuota/CpuPeriod, or undefined when Docker cannot take it. */
function dockerCpuMax(value: string): Resources | undefined {
  const m = /^(max|\d{1,16}) ?(\d{1,16})?$/.exec(value);
  if (!m) return undefined;
  const out: Resources = {};
  if (m[1] === "max") out.CpuQuota = -1;
  else if (Number(m[1]) >= 1000) out.CpuQuota = Number(m[1]);
  else return undefined;
  if (m[2] !== undefined) {
    const period = Number(m[2]);
    if (period < 1000 || period > 1_000_000) return undefined;
    out.CpuPeriod = period;
  }
  return out;
}

/**
 * The swap a container without a unified memory.swap.max keeps when unified
 * memory.max replaces its memory limit: what the CRI fields allowed beside
 * it (none when they set no swap limit, as at create; -1 for unlimited).
 */
function swapBeside(base: Resources): number {
  if (base.MemorySwap === -1) return -1;
  if (base.MemorySwap !== undefined && base.Memory !== undefined) return Math.max(0, base.MemorySwap - base.Memory);
  return 0;
}

/**
 * Splits `unified` (syntax already checked: src/cgroup-unified-keys.ts) into Docker
 * fields and files. `base` is what the CRI fields give Docker; `current` the
 * container's HostConfig on update (its memory limit carries a swap key that
 * comes without one). On cgroup v1 the keys that need a file are refused.
 */
export function planUnified(
  unified: Readonly<Record<string, string>>,
  base: Resources,
  version: CgroupVersion,
  current?: Pick<Resources, "Memory">,
): UnifiedPlan {
  const docker: Resources = {};
  const files: Record<string, string> = {};
  const pids = unified[PIDS_MAX];
  if (pids !== undefined) {
    if (pids !== "max" && !(/^[1-9]/.test(pids) && decimal(pids) !== undefined)) {
      throw invalidArgument(`unified ${PIDS_MAX} "${pids}" is neither "max" nor a positive number`);
    }
    // Docker: -1 is unlimited (0 leaves the limit unchanged on update).
    docker.PidsLimit = pids === "max" ? -1 : Number(pids);
  }
  const memoryMax = unified["memory.max"];
  if (memoryMax !== undefined) {
    const bytes = dockerBytes(memoryMax);
    if (bytes === undefined) files["memory.max"] = memoryMax;
    else {
      docker.Memory = bytes;
      if (unified["memory.swap.max"] === undefined) {
        const swap = swapBeside(base);
        docker.MemorySwap = swap < 0 ? -1 : bytes + swap;
      }
    }
  }
  const swap = unified["memory.swap.max"];
  if (swap !== undefined) {
    // A memory.max going to the file leaves no limit Docker knows to add the swap to.
    const memory = files["memory.max"] !== undefined ? undefined : (docker.Memory ?? base.Memory ?? current?.Memory);
    const bytes = decimal(swap);
    if (memory && memory > 0 && (swap === "max" || (bytes !== undefined && memory + bytes <= Number.MAX_SAFE_INTEGER))) {
      docker.Memory ??= memory;
      docker.MemorySwap = swap === "max" ? -1 : memory + bytes!;
    } else {
      files["memory.swap.max"] = swap;
    }
  }
  const low = unified["memory.low"];
  if (low !== undefined) {
    const bytes = version === 2 ? dockerBytes(low) : undefined;
    if (bytes === undefined) files["memory.low"] = low;
    else docker.MemoryReservation = bytes;
  }
  const cpuMax = unified["cpu.max"];
  if (cpuMax !== undefined) {
    const fields = dockerCpuMax(cpuMax);
    if (fields) Object.assign(docker, fields);
    else files["cpu.max"] = cpuMax;
  }
  const carried = new Set([PIDS_MAX, "memory.max", "memory.swap.max", "memory.low", "cpu.max"]);
  for (const [key, value] of Object.entries(unified)) if (!carried.has(key)) files[key] = value;
  const written = Object.keys(files);
  if (version === 1 && written.length > 0) {
    throw unimplemented(`unified settings need cgroup v2; this node runs cgroup v1 (${written.join(", ")} have no Docker field to carry them)`);
  }
  return { docker, files };
}

/** INVALID_ARGUMENT naming the first key whose controller `controllers` lacks (`where` says whose list it is). */
export function requireControllers(keys: Iterable<string>, controllers: ReadonlySet<string>, where: string): void {
  for (const key of keys) {
    const controller = controllerOf(key);
    if (!controllers.has(controller)) {
      const offered = [...controllers].sort().join(" ") || "none";
      throw invalidArgument(`unified ${key}: the ${controller} controller is not available to the container's cgroup (${where} offers: ${offered})`);
    }
  }
}
