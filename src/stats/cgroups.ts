/**
 * Reads a process's resource usage straight from the kernel's cgroup files,
 * so container stats never ask dockerd (whose stats endpoint samples for a
 * second and walks the writable layer — the load cri-dockerd is known for).
 *
 * Both hierarchies are supported: cgroup v1 (one mount per controller under
 * /sys/fs/cgroup) and the unified v2 hierarchy. A process's cgroup comes from
 * /proc/<pid>/cgroup, which is right whatever Docker's cgroup driver and the
 * pod's cgroup parent are.
 */
import { statfs } from "node:fs/promises";
import { dirname, join } from "node:path";
import { readKernelFile } from "./kernel-file.ts";
import { type CgroupPressure, readCgroupPressure } from "./pressure.ts";

/** statfs f_type of cgroup2. */
const CGROUP2_MAGIC = 0x63677270;
/** cgroup v1 reports "no limit" as the largest page-aligned int64. */
const V1_UNLIMITED = 0x7ffffffffffff000n;

export interface CgroupSample {
  /** Cumulative CPU time of the cgroup, nanoseconds. */
  cpuUsageNanos: bigint;
  /** Total memory charged to the cgroup, including page cache. */
  memoryUsageBytes: bigint;
  /** Usage minus inactive file cache: what kubelet evicts on (as cAdvisor computes it). */
  workingSetBytes: bigint;
  rssBytes: bigint;
  pageFaults: bigint;
  majorPageFaults: bigint;
  /** The memory limit, or undefined when unlimited. */
  limitBytes: bigint | undefined;
  /** Processes (tasks) in the cgroup, when the pids controller is there. */
  processes: bigint | undefined;
  /** Pressure stall information, when the kernel keeps it for the cgroup (pressure.ts). */
  pressure: CgroupPressure | undefined;
}

export type CgroupVersion = 1 | 2;

export class CgroupReader {
  private version: Promise<CgroupVersion> | undefined;

  /**
   * `version` is detected from the mount unless given (tests point at a fake
   * tree). `unifiedRoot` is where a v1 host mounts the v2 hierarchy beside its
   * controllers (the hybrid layout), read for pressure only.
   */
  constructor(
    readonly root = "/sys/fs/cgroup",
    readonly proc = "/proc",
    version?: CgroupVersion,
    private readonly unifiedRoot = join(root, "unified"),
  ) {
    if (version) this.version = Promise.resolve(version);
  }

  cgroupVersion(): Promise<CgroupVersion> {
    this.version ??= statfs(this.root).then((fs) => (fs.type === CGROUP2_MAGIC ? 2 : 1));
    return this.version;
  }

  /** The cgroup paths of a process, by controller ("" is the v2 unified path). */
  async cgroupPaths(pid: number): Promise<Map<string, string>> {
    return parseProcCgroup(await readKernelFile(join(this.proc, String(pid), "cgroup")));
  }

  /**
   * The pressure of the cgroup one level above a process's (v2 path): for a
   * pod's pause container with a cgroup parent, the pod's cgroup, whose
   * stalls cover every container of the pod. Undefined when there is none.
   */
  async parentPressure(pid: number): Promise<CgroupPressure | undefined> {
    const path = (await this.cgroupPaths(pid)).get("");
    if (!path || path === "/" || dirname(path) === "/") return undefined;
    const root = (await this.cgroupVersion()) === 2 ? this.root : this.unifiedRoot;
    return readCgroupPressure(join(root, dirname(path)));
  }

  /**
   * The memory limit of the cgroup one level above a process's (the pod's
   * cgroup for a pause container with a cgroup parent, where kubelet puts
   * the pod's limit); undefined when unlimited or unknown.
   */
  async parentMemoryLimit(pid: number): Promise<bigint | undefined> {
    const paths = await this.cgroupPaths(pid);
    if ((await this.cgroupVersion()) === 2) {
      const path = paths.get("");
      if (!path || path === "/" || dirname(path) === "/") return undefined;
      const text = (await readKernelFile(join(this.root, dirname(path), "memory.max"))).trim();
      return text === "max" ? undefined : BigInt(text);
    }
    const path = paths.get("memory");
    if (!path || path === "/" || dirname(path) === "/") return undefined;
    const limit = await readBigInt(join(this.root, "memory", dirname(path), "memory.limit_in_bytes"));
    return limit >= V1_UNLIMITED ? undefined : limit;
  }

  /** Samples the cgroup a process is in. Throws if the process is gone. */
  async sample(pid: number): Promise<CgroupSample> {
    const paths = await this.cgroupPaths(pid);
    return (await this.cgroupVersion()) === 2 ? this.sampleV2(paths.get("") ?? "/") : this.sampleV1(paths);
  }

  private async sampleV1(paths: Map<string, string>): Promise<CgroupSample> {
    const dir = (controller: string) => join(this.root, controller, paths.get(controller) ?? "/");
    const unified = paths.get("");
    const [usage, memUsage, memLimit, memStat, pids, pressure] = await Promise.all([
      readBigInt(join(dir("cpuacct"), "cpuacct.usage")),
      readBigInt(join(dir("memory"), "memory.usage_in_bytes")),
      readBigInt(join(dir("memory"), "memory.limit_in_bytes")),
      readKernelFile(join(dir("memory"), "memory.stat")).then(parseKeyValues),
      paths.has("pids") ? readBigInt(join(dir("pids"), "pids.current")).catch(() => undefined) : undefined,
      // The root cgroup has no pressure files of its own (the host's are /proc/pressure).
      unified && unified !== "/" ? readCgroupPressure(join(this.unifiedRoot, unified)) : undefined,
    ]);
    const inactiveFile = memStat.get("total_inactive_file") ?? 0n;
    return {
      cpuUsageNanos: usage,
      memoryUsageBytes: memUsage,
      workingSetBytes: memUsage > inactiveFile ? memUsage - inactiveFile : 0n,
      rssBytes: memStat.get("total_rss") ?? memStat.get("rss") ?? 0n,
      pageFaults: memStat.get("total_pgfault") ?? 0n,
      majorPageFaults: memStat.get("total_pgmajfault") ?? 0n,
      limitBytes: memLimit >= V1_UNLIMITED ? undefined : memLimit,
      processes: pids,
      pressure,
    };
  }

  private async sampleV2(path: string): Promise<CgroupSample> {
    const dir = join(this.root, path);
    const [cpuStat, memCurrent, memMax, memStat, pids, pressure] = await Promise.all([
      readKernelFile(join(dir, "cpu.stat")).then(parseKeyValues),
      readBigInt(join(dir, "memory.current")),
      readKernelFile(join(dir, "memory.max")).then((s) => s.trim()),
      readKernelFile(join(dir, "memory.stat")).then(parseKeyValues),
      readBigInt(join(dir, "pids.current")).catch(() => undefined),
      readCgroupPressure(dir),
    ]);
    const inactiveFile = memStat.get("inactive_file") ?? 0n;
    return {
      cpuUsageNanos: (cpuStat.get("usage_usec") ?? 0n) * 1000n,
      memoryUsageBytes: memCurrent,
      workingSetBytes: memCurrent > inactiveFile ? memCurrent - inactiveFile : 0n,
      rssBytes: memStat.get("anon") ?? 0n,
      pageFaults: memStat.get("pgfault") ?? 0n,
      majorPageFaults: memStat.get("pgmajfault") ?? 0n,
      limitBytes: memMax === "max" ? undefined : BigInt(memMax),
      processes: pids,
      pressure,
    };
  }
}

/**
 * Parses /proc/<pid>/cgroup: "hierarchy-id:controller[,controller]:path".
 * Each controller of a comma-joined v1 hierarchy (cpu,cpuacct) gets the path;
 * the v2 line has an empty controller list and is stored under "".
 */
export function parseProcCgroup(text: string): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of text.split("\n")) {
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    const path = line.slice(second + 1);
    if (controllers === "") paths.set("", path);
    for (const controller of controllers.split(",")) {
      if (controller) paths.set(controller.replace(/^name=/, ""), path);
    }
  }
  return paths;
}

/** Parses "key value" lines (memory.stat, cpu.stat) into bigints. */
export function parseKeyValues(text: string): Map<string, bigint> {
  const values = new Map<string, bigint>();
  for (const line of text.split("\n")) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value && /^\d+$/.test(value)) values.set(key, BigInt(value));
  }
  return values;
}

async function readBigInt(path: string): Promise<bigint> {
  const text = (await readKernelFile(path)).trim();
  if (!/^\d+$/.test(text)) throw new Error(`${path} holds "${text}", not a number`);
  return BigInt(text);
}
