/**
 * A checkpointed container's configuration for the pod manifest, read back
 * from what cridock put on its Docker container at CreateContainer (the CRI
 * labels, name, mounts and log path it records as labels; Docker's own
 * config for the rest). Enough to create it again around its checkpoint:
 * the restored processes bring their own memory, environment and working
 * directory, so command, args and env only keep what inspect shows.
 */
import { posix } from "node:path";
import type { ContainerInspect } from "../../docker/types.ts";
import { containerInfo } from "../container/convert.ts";
import type { ManifestContainerSpec } from "./manifest.ts";

export function capturedSpec(c: ContainerInspect, sandboxLogDirectory: string): ManifestContainerSpec {
  const info = containerInfo(c);
  return {
    name: info.name,
    attempt: info.attempt,
    image: info.image,
    userImage: info.image,
    command: [...(c.Config.Entrypoint ?? [])],
    args: [...(c.Config.Cmd ?? [])],
    workingDir: "",
    envs: (c.Config.Env ?? []).flatMap((e) => {
      const at = e.indexOf("=");
      return at > 0 ? [{ key: e.slice(0, at), value: e.slice(at + 1) }] : [];
    }),
    mounts: info.mounts.map(({ imageRef: _ref, ...m }) => m),
    devices: [],
    cdiDevices: [],
    labels: info.labels,
    annotations: info.annotations,
    logPath: relativeLogPath(info.logPath, sandboxLogDirectory),
    stdin: c.Config.OpenStdin ?? false,
    stdinOnce: c.Config.StdinOnce ?? false,
    tty: c.Config.Tty ?? false,
    stopSignal: "",
  };
}

/** The log path relative to the sandbox's log directory, as CreateContainer takes it; "" when it is not under it. */
export function relativeLogPath(full: string, directory: string): string {
  if (!full || !directory) return "";
  const relative = posix.relative(directory, full);
  return relative && !relative.startsWith("..") && !posix.isAbsolute(relative) ? relative : "";
}
