/**
 * The cgroup v2 side of `unified`: which controllers a container's cgroup
 * will have (checked at create, before the cgroup exists), where its own
 * cgroup directory is once it runs, and the writes of the keys that have no
 * Docker field (unified.ts) into that directory.
 *
 * Confinement: a write goes to `join(dir, key)` only, where `dir` is the
 * container's own cgroup found from its init process (/proc/<pid>/cgroup,
 * the "0::" line) and checked to be named for the container (Docker names
 * it `<id>` under cgroupfs and `docker-<id>.scope` under systemd), and `key`
 * has passed src/cgroup-unified-keys.ts (a plain file name, never a path). Nothing in a
 * request is ever followed as a path. The cgroup root comes from the
 * CgroupReader, so tests point it at a fake tree.
 */
import { constants } from "node:fs";
import { open, stat } from "node:fs/promises";
import { basename, dirname, join, normalize } from "node:path";
import { failedPrecondition, invalidArgument } from "../../errors.ts";
import type { CgroupReader, CgroupVersion } from "../../stats/cgroups.ts";
import { readKernelFile } from "../../stats/kernel-file.ts";
import { checkUnifiedKey, checkUnifiedValue, controllerOf, quoted } from "../../cgroup-unified-keys.ts";
import { requireControllers } from "./unified.ts";

export type CgroupDriver = "systemd" | "cgroupfs";

/** Errors of a write that mean the kernel refused the key or value (rather than the host failing). */
const REFUSED = new Set(["EINVAL", "ENOENT", "EACCES", "EPERM", "ERANGE", "EOPNOTSUPP", "ENODEV", "EBUSY", "E2BIG", "EOVERFLOW"]);

/**
 * systemd's path of a slice: kubepods-burstable-pod1.slice is
 * /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice
 * (each dash nests one level). Undefined for a name that is no slice.
 */
export function sliceDir(slice: string): string | undefined {
  if (!slice.endsWith(".slice") || slice.includes("/")) return undefined;
  const name = slice.slice(0, -".slice".length);
  if (name === "-") return "/";
  if (!/^[A-Za-z0-9_.:\\]+(-[A-Za-z0-9_.:\\]+)*$/.test(name)) return undefined;
  const parts = name.split("-");
  return "/" + parts.map((_, i) => `${parts.slice(0, i + 1).join("-")}.slice`).join("/");
}

/**
 * The cgroup path (from the root) of the parent Docker puts a container's
 * cgroup under: HostConfig.CgroupParent, a slice name under the systemd
 * driver and a path under cgroupfs. Undefined when there is none (Docker's
 * default parent) or it is not one the driver takes.
 */
export function parentPath(cgroupParent: string, driver: CgroupDriver): string | undefined {
  if (!cgroupParent) return undefined;
  const path = driver === "systemd" ? sliceDir(cgroupParent) : normalize(`/${cgroupParent}`);
  return path && path !== "/" && !path.split("/").includes("..") ? path : undefined;
}

/** The words of a cgroup list file (cgroup.controllers, cgroup.subtree_control); undefined when unreadable. */
async function words(path: string): Promise<Set<string> | undefined> {
  try {
    return new Set((await readKernelFile(path)).split(/\s+/).filter(Boolean));
  } catch {
    return undefined;
  }
}

function errno(err: unknown): string {
  return (err as NodeJS.ErrnoException)?.code ?? "";
}

export class UnifiedCgroups {
  constructor(private readonly reader: CgroupReader) {}

  version(): Promise<CgroupVersion> {
    return this.reader.cgroupVersion();
  }

  /** `path` under the root, refusing anything that would leave it. */
  private under(path: string): string {
    const dir = join(this.reader.root, path);
    if (dir !== this.reader.root && !dir.startsWith(`${this.reader.root}/`)) throw invalidArgument(`cgroup path ${quoted(path)} leaves the cgroup root`);
    return dir;
  }

  /**
   * At CreateContainer on cgroup v2, before the container's cgroup exists:
   * every key's controller must be one the container's cgroup will have, and
   * every key a writable interface file. runc enables in each parent's
   * cgroup.subtree_control every controller the parent has (its
   * cgroup.controllers) when it creates the container's cgroup, so those
   * two lists of the pod's cgroup are what the container can get. Without a
   * parent (or before it exists) the root's cgroup.controllers stand in, and
   * only the start's write can tell the interface files.
   */
  async checkBeforeCreate(keys: readonly string[], cgroupParent: string, driver: CgroupDriver): Promise<void> {
    if (keys.length === 0) return;
    const parent = parentPath(cgroupParent, driver);
    const dir = parent ? this.under(parent) : undefined;
    const [enabled, offered] = dir
      ? await Promise.all([words(join(dir, "cgroup.subtree_control")), words(join(dir, "cgroup.controllers"))])
      : [undefined, undefined];
    if (dir && (enabled || offered)) {
      requireControllers(keys, new Set([...(enabled ?? []), ...(offered ?? [])]), `the pod's cgroup ${parent}`);
      for (const key of keys) await this.requireInterfaceFile(dir, key, `the pod's cgroup ${parent}`);
      return;
    }
    requireControllers(keys, (await words(join(this.reader.root, "cgroup.controllers"))) ?? new Set(), "the cgroup root");
  }

  /** INVALID_ARGUMENT unless `key` is a writable file of the cgroup `dir` (a pod's cgroup has the files its containers get). */
  private async requireInterfaceFile(dir: string, key: string, where: string): Promise<void> {
    checkUnifiedKey(key);
    const info = await stat(join(dir, key)).catch(() => undefined);
    if (!info?.isFile()) throw invalidArgument(`unified ${key} is not an interface file of ${where}`);
    if ((info.mode & 0o222) === 0) throw invalidArgument(`unified ${key} is a read-only file of ${where}, not a setting`);
  }

  /**
   * The container's own cgroup directory, from its init process; undefined
   * when the process is gone (it exited). A cgroup not named for the
   * container is refused: the pid may have been reused, and nothing is
   * written anywhere else.
   */
  async containerDir(pid: number, containerId: string): Promise<string | undefined> {
    let path: string | undefined;
    try {
      path = (await this.reader.cgroupPaths(pid)).get("");
    } catch {
      return undefined;
    }
    if (!path || !containerId || !basename(path).includes(containerId)) {
      throw failedPrecondition(`the cgroup of container ${containerId.slice(0, 12)}'s process ${pid} is ${quoted(path ?? "unknown")}, not the container's own; unified settings are written nowhere else`);
    }
    return this.under(path);
  }

  /**
   * Writes `files` into the cgroup `dir`, one key after another (a value of
   * several settings, such as io.max for two devices, is one line each, as
   * runc writes it). A value the kernel refuses is INVALID_ARGUMENT naming
   * key and value; with `undo`, the keys already written get their earlier
   * values back first, and the earlier values of all are returned (for a
   * caller whose next step fails). `gone` when `dir` disappeared meanwhile:
   * the container exited.
   */
  async write(dir: string, files: Readonly<Record<string, string>>, undo = false): Promise<{ gone: boolean; previous: [string, string][] }> {
    const previous: [string, string][] = [];
    for (const [key, value] of Object.entries(files)) {
      checkUnifiedKey(key);
      checkUnifiedValue(key, value);
      const path = join(dir, key);
      if (dirname(path) !== dir) throw invalidArgument(`unified key ${quoted(key)} is not a file of the container's cgroup`);
      const before = undo ? await readKernelFile(path).catch(() => undefined) : undefined;
      try {
        await writeLines(path, value);
      } catch (err) {
        if (!(await stat(dir).catch(() => undefined))) return { gone: true, previous };
        if (undo) await this.restore(dir, previous);
        throw await this.refusal(dir, key, value, err);
      }
      if (before !== undefined) previous.push([key, before]);
    }
    return { gone: false, previous };
  }

  /** Puts back earlier values (best effort: what could not be restored is left as the kernel has it). */
  async restore(dir: string, previous: readonly [string, string][]): Promise<void> {
    for (const [key, text] of [...previous].reverse()) {
      await writeLines(join(dir, key), text).catch(() => undefined);
    }
  }

  /** INVALID_ARGUMENT naming the first key whose controller the running container's cgroup `dir` lacks. */
  async checkControllers(dir: string, keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    requireControllers(keys, (await words(join(dir, "cgroup.controllers"))) ?? new Set(), "the container's cgroup");
  }

  private async refusal(dir: string, key: string, value: string, err: unknown): Promise<Error> {
    const code = errno(err);
    if (!REFUSED.has(code)) return err instanceof Error ? err : new Error(String(err));
    if (code === "ENOENT") {
      const controllers = await words(join(dir, "cgroup.controllers"));
      if (controllers && !controllers.has(controllerOf(key))) {
        return invalidArgument(`unified ${key}=${quoted(value)}: the ${controllerOf(key)} controller is not enabled in the container's cgroup (it has: ${[...controllers].sort().join(" ") || "none"})`);
      }
      return invalidArgument(`unified ${key}=${quoted(value)}: ${key} is not an interface file of the container's cgroup`);
    }
    return invalidArgument(`unified ${key}=${quoted(value)}: the kernel refused the value (${code})`, err);
  }
}

/** Opens a cgroup file for writing only (never creating it, never through a symlink) and writes each line with its own write, as the kernel takes one setting per write. */
async function writeLines(path: string, text: string): Promise<void> {
  const lines = text.split("\n").filter((l) => l.length > 0);
  const handle = await open(path, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
  try {
    for (const line of lines) await handle.write(line);
  } finally {
    await handle.close();
  }
}
