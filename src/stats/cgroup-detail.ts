/**
 * The cgroup figures the CRI metrics RPCs report beyond what the stats RPCs
 * need (cgroups.ts): CPU user/system time and CFS throttling, the memory
 * breakdown, OOM kills, and block I/O per device. Read only when kubelet
 * scrapes metrics, so the stats hot path stays as cheap as it was.
 * cgroup v1 and v2; a file the kernel does not offer leaves its figure out.
 */
import { readKernelFile } from "./kernel-file.ts";
import { join } from "node:path";
import { parseKeyValues, type CgroupReader } from "./cgroups.ts";

/** USER_HZ: cpuacct.stat counts clock ticks of 10 ms on every Linux architecture kubelet runs on. */
const NANOS_PER_TICK = 10_000_000n;

export interface BlockIo {
  /** "major:minor" of the device. */
  device: string;
  readBytes: bigint;
  writeBytes: bigint;
  reads: bigint;
  writes: bigint;
}

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

/** v1 blkio.throttle.io_service_bytes / io_serviced: "8:0 Read 4096" lines, per device. */
export function parseBlkioV1(bytes: string, ops: string): BlockIo[] {
  const devices = new Map<string, BlockIo>();
  const get = (device: string) => {
    let io = devices.get(device);
    if (!io) devices.set(device, (io = { device, readBytes: 0n, writeBytes: 0n, reads: 0n, writes: 0n }));
    return io;
  };
  for (const [text, kind] of [[bytes, "bytes"], [ops, "ops"]] as const) {
    for (const line of text.split("\n")) {
      const [device, op, value] = line.trim().split(/\s+/);
      if (!device || !/^\d+:\d+$/.test(device) || !value || !/^\d+$/.test(value)) continue;
      const io = get(device);
      const n = BigInt(value);
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
    out.push({ device, readBytes: n("rbytes"), writeBytes: n("wbytes"), reads: n("rios"), writes: n("wios") });
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
    const [cpu, mem, events, swap, peak, io] = await Promise.all([
      kv(join(dir, "cpu.stat")),
      kv(join(dir, "memory.stat")),
      kv(join(dir, "memory.events")),
      int(join(dir, "memory.swap.current")),
      int(join(dir, "memory.peak")),
      lines(join(dir, "io.stat")),
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
      blockIo: parseIoStatV2(io),
    };
  }
  const dir = (controller: string) => join(reader.root, controller, paths.get(controller) ?? "/");
  const [acct, cpu, mem, failcnt, maxUsage, oom, bytes, ops] = await Promise.all([
    kv(join(dir("cpuacct"), "cpuacct.stat")),
    kv(join(dir("cpu"), "cpu.stat")),
    kv(join(dir("memory"), "memory.stat")),
    int(join(dir("memory"), "memory.failcnt")),
    int(join(dir("memory"), "memory.max_usage_in_bytes")),
    kv(join(dir("memory"), "memory.oom_control")),
    lines(join(dir("blkio"), "blkio.throttle.io_service_bytes_recursive")).then((t) => t || lines(join(dir("blkio"), "blkio.throttle.io_service_bytes"))),
    lines(join(dir("blkio"), "blkio.throttle.io_serviced_recursive")).then((t) => t || lines(join(dir("blkio"), "blkio.throttle.io_serviced"))),
  ]);
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
