/**
 * The environment a container's CDI devices add, for its exec processes.
 * dockerd injects a CDI device's `containerEdits.env` into the OCI spec of
 * the container's own process only; an exec process gets `Config.Env`, where
 * those variables are not. containerd's exec processes inherit the
 * container's process environment, device variables included, and kubelet's
 * users expect the same (a GPU's NVIDIA_VISIBLE_DEVICES in `kubectl exec`).
 *
 * The variables are read from the spec the container runs with: the
 * config.json of its bundle, which is the working directory of the
 * containerd shim that is its init process's parent. That covers every CDI
 * spec format and source dockerd reads, without cridock parsing them.
 */
import { readFile, readlink } from "node:fs/promises";
import { basename, join } from "node:path";
import type { ContainerInspect } from "../../docker/types.ts";

/** Variables Docker gives every exec process itself (container.CreateDaemonEnvironment). */
const DOCKER_OWN = new Set(["PATH", "HOSTNAME", "TERM", "HOME"]);

const keyOf = (entry: string) => entry.slice(0, entry.indexOf("=") >>> 0);

/** The entries of the spec's environment whose variable neither Config.Env nor Docker sets. */
export function cdiOnlyEnv(specEnv: readonly string[], configEnv: readonly string[]): string[] {
  const known = new Set(configEnv.map(keyOf));
  return specEnv.filter((entry) => entry.includes("=") && !known.has(keyOf(entry)) && !DOCKER_OWN.has(keyOf(entry)));
}

export function hasCdiDevices(c: Pick<ContainerInspect, "HostConfig">): boolean {
  return (c.HostConfig.DeviceRequests ?? []).some((r) => r.Driver === "cdi" && (r.DeviceIDs?.length ?? 0) > 0);
}

/** The process environment of container `id`'s OCI spec, from its bundle; undefined when it cannot be found. */
export async function bundleProcessEnv(id: string, pid: number, proc = "/proc"): Promise<string[] | undefined> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  const stat = await readFile(join(proc, String(pid), "stat"), "utf8").catch(() => undefined);
  // The parent is the 4th field after the command, which sits in the last parentheses.
  const ppid = stat ? Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) : NaN;
  if (!Number.isSafeInteger(ppid) || ppid <= 1) return undefined;
  const bundle = await readlink(join(proc, String(ppid), "cwd")).catch(() => undefined);
  // The shim of another container (a reused pid) has another bundle: its directory is named for its container.
  if (!bundle || basename(bundle) !== id) return undefined;
  try {
    const spec = JSON.parse(await readFile(join(bundle, "config.json"), "utf8")) as { process?: { env?: unknown } };
    const env = spec.process?.env;
    return Array.isArray(env) ? env.filter((e): e is string => typeof e === "string") : undefined;
  } catch {
    return undefined;
  }
}
