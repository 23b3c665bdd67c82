/**
 * The cgroup figures the CRI metrics RPCs report beyond what the stats RPCs
 * need (cgroups.ts): CPU user/system time and CFS throttling, the memory
 * breakdown (kernel memory included), OOM kills, block I/O per device and
 * operation, threads and their limit, the swap limit, and the processes of
 * the cgroup. Read only when kubelet scrapes metrics, so the stats hot path
 * stays as cheap as it was. cgroup v1 and v2; a file the kernel does not
 * offer leaves its figure out, except where cAdvisor reports 0 for it (said
 * at the field).
 */
import { readKernelFile } from "./kernel-file.ts";
import { join } from "node:path";
import { parseKeyValues, type CgroupReader } from "./cgroups.ts";
import { countThreads, readCgroupProcs } from "./process-files.ts";

/** USER_HZ: cpuacct.stat counts clock ticks of 10 ms on every Linux architecture kubelet runs on. */
const NANOS_PER_TICK = 10_000_000n;

export interface BlockIo {
  /** "major:minor" of the device. */
  device: string;
  readBytes: bigint;
  writeBytes: bigint;
  reads: bigint;
  writes: bigint;
  /**
   * Bytes per operation as the kernel names them: v1's "Read", "Write",
   * "Sync", "Async", "Discard", "Total"; v2's rbytes and wbytes as "Read"
   * and "Write" (runc's mapping, which cAdvisor reports).
   */
  serviceBytes: { op: string; value: bigint }[];
}

/**
 * cAdvisor reports a memory limit above 2^62 as 0 (no limit): v1's
 * "unlimited" (the largest page-aligned int64) and v2's "max".
 */
const SPEC_MEMORY_MAX = 1n << 62n;

export interface CgroupDetail {
  cpuUserNanos?: bigint;
  cpuSystemNanos?: bigint;
  cfsPeriods?: bigint;
  cfsThrottledPeriods?: bigint;
  cfsThrottledNanos?: bigint;
  memoryCache?: bigint;
  memoryMappedFile?: bigint;
  memorySwap?: bigint;
  memoryFailcnt?: bigint;
  memoryMaxUsage?: bigint;
  oomKills?: bigint;
  /**
   * Kernel memory charged to the cgroup. v1: memory.kmem.usage_in_bytes (0
   * when the kernel does not keep it, as cAdvisor reports). v2: memory.stat
   * "kernel" where the kernel reports it, else the sum of the parts the
   * kernel documents for it (kernel_stack, pagetables, percpu, vmalloc,
   * slab). cAdvisor reports 0 on v2 (runc's cgroup library never fills the
   * figure there); the kernel's own count is the truer answer.
   */
  memoryKernelUsage?: bigint;
  /**
   * The swap limit as cAdvisor's spec has it: v1 memory.memsw.limit_in_bytes
   * (memory plus swap), v2 memory.swap.max (swap alone); 0 when unlimited or
   * when the kernel has no such file (swap accounting off).
   */
  memorySwapLimit?: bigint;
  /** Tasks (threads) in the cgroup: pids.current, else counted in /proc. */
  threads?: bigint;
  /** pids.max; 0 when unlimited or when the pids controller is absent (cAdvisor's convention). */
  threadsMax?: bigint;
  /** The processes of the cgroup itself (cgroup.procs of the cpu hierarchy on v1, as cAdvisor reads). */
  procs: number[];
  blockIo: BlockIo[];
}

async function kv(path: string): Promise<Map<string, bigint>> {
  try {
    return parseKeyValues(await readKernelFile(path));
  } catch {
    return new Map();
  }
}

async function int(path: string): Promise<bigint | undefined> {
  try {
    const text = (await readKernelFile(path)).trim();
    return /^\d+$/.test(text) ? BigInt(text) : undefined;
  } catch {
    return undefined;
  }
}

async function lines(path: string): Promise<string> {
  return readKernelFile(path).catch(() => "");
}

/** A limit file ("max" or bytes) as cAdvisor's spec reports it: 0 when unlimited, unreadable or absent. */
async function specLimit(path: string): Promise<bigint> {
  const text = (await readKernelFile(path).catch(() => "")).trim();
  if (!/^\d+$/.test(text)) return 0n;
  const value = BigInt(text);
  return value > SPEC_MEMORY_MAX ? 0n : value;
}

/** pids.max: 0 when "max" or unreadable (runc's and cAdvisor's "no limit"). */
async function pidsMax(path: string): Promise<bigint> {
  return (await int(path)) ?? 0n;
}

/** The parts of v2's memory.stat "kernel", for kernels that do not report the total. */
const V2_KERNEL_PARTS = ["kernel_stack", "pagetables", "percpu", "vmalloc", "slab"];

/** v2 kernel memory from memory.stat (see CgroupDetail.memoryKernelUsage); undefined without a memory.stat. */
export function kernelMemoryV2(stat: Map<string, bigint>): bigint | undefined {
  if (stat.size === 0) return undefined;
  const kernel = stat.get("kernel");
  if (kernel !== undefined) return kernel;
  return V2_KERNEL_PARTS.reduce((sum, key) => sum + (stat.get(key) ?? 0n), 0n);
}

/** v1 blkio.throttle.io_service_bytes / io_serviced: "8:0 Read 4096" lines, per device. */
export function parseBlkioV1(bytes: string, ops: string): BlockIo[] {
  const devices = new Map<string, BlockIo>();
  const get = (device: string) => {
    let io = devices.get(device);
    if (!io) devices.set(device, (io = { device, readBytes: 0n, writeBytes: 0n, reads: 0n, writes: 0n, serviceBytes: [] }));
    return io;
  };
  for (const [text, kind] of [[bytes, "bytes"], [ops, "ops"]] as const) {
    for (const line of text.split("\n")) {
      const [device, op, value] = line.trim().split(/\s+/);
      if (!device || !/^\d+:\d+$/.test(device) || !value || !/^\d+$/.test(value)) continue;
      const io = get(device);
      const n = BigInt(value);
      if (kind === "bytes" && op && /^[A-Za-z]+$/.test(op)) io.serviceBytes.push({ op, value: n });
      if (op === "Read") kind === "bytes" ? (io.readBytes = n) : (io.reads = n);
      if (op === "Write") kind === "bytes" ? (io.writeBytes = n) : (io.writes = n);
    }
  }
  return [...devices.values()];
}

/** v2 io.stat: "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0". */
export function parseIoStatV2(text: string): BlockIo[] {
  const out: BlockIo[] = [];
  for (const line of text.split("\n")) {
    const [device, ...pairs] = line.trim().split(/\s+/);
    if (!device || !/^\d+:\d+$/.test(device)) continue;
    const v = new Map(pairs.map((p) => p.split("=") as [string, string]));
    const n = (k: string) => (/^\d+$/.test(v.get(k) ?? "") ? BigInt(v.get(k)!) : 0n);
    const readBytes = n("rbytes");
    const writeBytes = n("wbytes");
    out.push({
      device,
      readBytes,
      writeBytes,
      reads: n("rios"),
      writes: n("wios"),
      serviceBytes: [
        { op: "Read", value: readBytes },
        { op: "Write", value: writeBytes },
      ],
    });
  }
  return out;
}

/** The detail of the cgroup `pid` is in; undefined when the process is gone. */
export async function readCgroupDetail(reader: CgroupReader, pid: number): Promise<CgroupDetail | undefined> {
  let paths: Map<string, string>;
  try {
    paths = await reader.cgroupPaths(pid);
  } catch {
    return undefined;
  }
  if ((await reader.cgroupVersion()) === 2) {
    const dir = join(reader.root, paths.get("") ?? "/");
    const [cpu, mem, events, swap, peak, io, swapMax, pidsCurrent, threadsMax, procs] = await Promise.all([
      kv(join(dir, "cpu.stat")),
      kv(join(dir, "memory.stat")),
      kv(join(dir, "memory.events")),
      int(join(dir, "memory.swap.current")),
      int(join(dir, "memory.peak")),
      lines(join(dir, "io.stat")),
      specLimit(join(dir, "memory.swap.max")),
      int(join(dir, "pids.current")),
      pidsMax(join(dir, "pids.max")),
      // Without its own path, dir is the root cgroup: its processes are the host's, not the container's.
      paths.has("") ? readCgroupProcs(dir) : [],
    ]);
    const usec = (k: string) => (cpu.has(k) ? cpu.get(k)! * 1000n : undefined);
    return {
      cpuUserNanos: usec("user_usec"),
      cpuSystemNanos: usec("system_usec"),
      cfsPeriods: cpu.get("nr_periods"),
      cfsThrottledPeriods: cpu.get("nr_throttled"),
      cfsThrottledNanos: usec("throttled_usec"),
      memoryCache: mem.get("file"),
      memoryMappedFile: mem.get("file_mapped"),
      memorySwap: swap,
      memoryFailcnt: events.get("max"),
      memoryMaxUsage: peak,
      oomKills: events.get("oom_kill"),
      memoryKernelUsage: kernelMemoryV2(mem),
      memorySwapLimit: mem.size > 0 ? swapMax : undefined,
      // Without the pids controller (or its count), the tasks of the cgroup's processes.
      threads: pidsCurrent ?? countThreads(procs, reader.proc),
      threadsMax,
      procs,
      blockIo: parseIoStatV2(io),
    };
  }
  const dir = (controller: string) => join(reader.root, controller, paths.get(controller) ?? "/");
  const pids = paths.has("pids");
  const [acct, cpu, mem, failcnt, maxUsage, oom, bytes, ops, kmem, memswLimit, pidsCurrent, threadsMax, procs] = await Promise.all([
    kv(join(dir("cpuacct"), "cpuacct.stat")),
    kv(join(dir("cpu"), "cpu.stat")),
    kv(join(dir("memory"), "memory.stat")),
    int(join(dir("memory"), "memory.failcnt")),
    int(join(dir("memory"), "memory.max_usage_in_bytes")),
    kv(join(dir("memory"), "memory.oom_control")),
    lines(join(dir("blkio"), "blkio.throttle.io_service_bytes_recursive")).then((t) => t || lines(join(dir("blkio"), "blkio.throttle.io_service_bytes"))),
    lines(join(dir("blkio"), "blkio.throttle.io_serviced_recursive")).then((t) => t || lines(join(dir("blkio"), "blkio.throttle.io_serviced"))),
    int(join(dir("memory"), "memory.kmem.usage_in_bytes")),
    specLimit(join(dir("memory"), "memory.memsw.limit_in_bytes")),
    // Without the controller, dir("pids") would be the root cgroup's: the whole host (cgroup.procs below likewise).
    pids ? int(join(dir("pids"), "pids.current")) : undefined,
    pids ? pidsMax(join(dir("pids"), "pids.max")) : 0n,
    paths.has("cpu") ? readCgroupProcs(dir("cpu")) : [],
  ]);
  const memory = mem.size > 0;
  const ticks = (k: string) => (acct.has(k) ? acct.get(k)! * NANOS_PER_TICK : undefined);
  return {
    cpuUserNanos: ticks("user"),
    cpuSystemNanos: ticks("system"),
    cfsPeriods: cpu.get("nr_periods"),
    cfsThrottledPeriods: cpu.get("nr_throttled"),
    cfsThrottledNanos: cpu.get("throttled_time"),
    memoryCache: mem.get("total_cache") ?? mem.get("cache"),
    memoryMappedFile: mem.get("total_mapped_file") ?? mem.get("mapped_file"),
    memorySwap: mem.get("total_swap") ?? mem.get("swap"),
    memoryFailcnt: failcnt,
    memoryMaxUsage: maxUsage,
    oomKills: oom.get("oom_kill"),
    memoryKernelUsage: memory ? (kmem ?? 0n) : undefined,
    memorySwapLimit: memory ? memswLimit : undefined,
    threads: pidsCurrent ?? countThreads(procs, reader.proc),
    threadsMax,
    procs,
    blockIo: parseBlkioV1(bytes, ops),
  };
}

const deviceNames = new Map<string, string>();

/** "/dev/<name>" of a block device number, as cAdvisor labels devices; the number itself when unknown. */
export async function blockDeviceName(majorMinor: string, sys = "/sys"): Promise<string> {
  const cached = deviceNames.get(majorMinor);
  if (cached) return cached;
  let name = majorMinor;
  try {
    const uevent = await readKernelFile(join(sys, "dev", "block", majorMinor, "uevent"));
    const m = /^DEVNAME=(.+)$/m.exec(uevent);
    if (m) name = `/dev/${m[1]!.trim()}`;
  } catch {
    // keep the number
  }
  deviceNames.set(majorMinor, name);
  return name;
}
