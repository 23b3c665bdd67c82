/**
 * Pressure stall information (PSI) of a cgroup: the cpu.pressure,
 * memory.pressure and io.pressure files of its directory in the unified
 * (v2) hierarchy. kubelet (KubeletPSI, GA in 1.36) reports them for every
 * container in the Summary API and takes them from the runtime's
 * ContainerStats.
 *
 * The files exist in every cgroup of a v2 hierarchy whatever controllers it
 * has, so a hybrid host (v1 controllers, with the v2 hierarchy mounted beside
 * them, as systemd's "hybrid" layout and many distributions do) has them too,
 * for the process's path on the "0::" line of /proc/<pid>/cgroup. A kernel
 * without PSI (or booted with psi=0) has no such files: then no pressure.
 */
import { readKernelFile } from "./kernel-file.ts";
import { join } from "node:path";

export interface PressureLine {
  /** Time tasks stalled, cumulative, in nanoseconds (the kernel counts microseconds). */
  totalNanos: bigint;
  /** Share of time stalled over the last 10, 60 and 300 seconds, in percent. */
  avg10: number;
  avg60: number;
  avg300: number;
}

export interface Pressure {
  some: PressureLine;
  /** Absent from the cpu file of kernels before 5.13 (only "some" is counted there). */
  full: PressureLine | undefined;
}

export interface CgroupPressure {
  cpu: Pressure | undefined;
  memory: Pressure | undefined;
  io: Pressure | undefined;
}

const LINE = /^(some|full) avg10=(\d+(?:\.\d+)?) avg60=(\d+(?:\.\d+)?) avg300=(\d+(?:\.\d+)?) total=(\d+)$/;

/** Parses one pressure file; undefined when it has no well-formed "some" line. */
export function parsePressure(text: string): Pressure | undefined {
  const lines = new Map<string, PressureLine>();
  for (const raw of text.split("\n")) {
    const m = LINE.exec(raw.trim());
    if (!m) continue;
    lines.set(m[1]!, {
      avg10: Number(m[2]),
      avg60: Number(m[3]),
      avg300: Number(m[4]),
      totalNanos: BigInt(m[5]!) * 1000n,
    });
  }
  const some = lines.get("some");
  return some && { some, full: lines.get("full") };
}

async function readPressureFile(path: string): Promise<Pressure | undefined> {
  try {
    return parsePressure(await readKernelFile(path));
  } catch {
    // No PSI in this kernel, or the cgroup is gone: no pressure to report.
    return undefined;
  }
}

/** The pressure of the v2 cgroup directory `dir`; undefined when it has none at all. */
export async function readCgroupPressure(dir: string): Promise<CgroupPressure | undefined> {
  const [cpu, memory, io] = await Promise.all(
    ["cpu", "memory", "io"].map((resource) => readPressureFile(join(dir, `${resource}.pressure`))),
  );
  return cpu || memory || io ? { cpu, memory, io } : undefined;
}
