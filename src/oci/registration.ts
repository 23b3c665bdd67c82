/**
 * Registering the layer with dockerd, in the steps that `cridock oci-layer
 * install` and the server's re-registration (layer-reregister.ts) share, so
 * that what the server puts back is exactly what install wrote: the
 * launcher, the `runtimes.cridock` entry merged into daemon.json
 * (daemon-config.ts, written as an operator would: daemon-json-file.ts),
 * and dockerd's SIGHUP, which reloads its runtimes without restarting it or
 * any container, followed by /info until dockerd shows the runtime.
 */
import { mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import process from "node:process";
import type { DockerInfo } from "../docker/types.ts";
import { describeCause } from "../errors.ts";
import { RefusedChange, withRuntime } from "./daemon-config.ts";
import { changeDaemonJson } from "./daemon-json-file.ts";
import { parseLauncher, renderLauncher } from "./launcher.ts";
import { LAYER_RUNTIME } from "./layer.ts";
import type { LayerRegistration } from "./registration-record.ts";
import { replaceFile } from "./replace-file.ts";

type Info = Pick<DockerInfo, "Runtimes" | "DefaultRuntime">;

/** A file's text, or undefined when there is no such file (any other error is thrown). */
export async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** A dockerd whose default runtime is the layer (a --default-runtime flag, which daemon.json's check cannot see) is refused. */
export function refuseLayerAsDefault(info: Info | undefined): void {
  if (info?.DefaultRuntime === LAYER_RUNTIME) {
    throw new RefusedChange(`dockerd's default runtime is "${LAYER_RUNTIME}", the layer itself: its launcher would run itself; make runc dockerd's default runtime (daemon.json "default-runtime" or dockerd's --default-runtime) first`);
  }
}

/**
 * The launcher at `registration.launcher`. "write" (install) writes it,
 * whatever is there; "keep" (re-registration) writes it only where it is
 * missing, keeps a launcher cridock wrote, and refuses any other file: it
 * is not the server's to overwrite. Returns whether it wrote.
 */
export async function ensureLauncher(registration: LayerRegistration, cridock: readonly string[], policy: "write" | "keep"): Promise<boolean> {
  if (policy === "keep") {
    const text = await readOptional(registration.launcher);
    if (text !== undefined) {
      if (parseLauncher(text)) return false;
      throw new RefusedChange(`${registration.launcher} exists and is not a launcher cridock wrote: run \`cridock oci-layer install\` to replace it`);
    }
  }
  const script = renderLauncher({ delegate: registration.delegate, editsDir: registration.editsDir, rootfsDir: registration.rootfsDir, cridock });
  await mkdir(dirname(registration.launcher), { recursive: true, mode: 0o755 });
  await replaceFile(registration.launcher, script, 0o755, { durable: true });
  return true;
}

/**
 * Merges `runtimes.cridock` = { path: launcher } into daemon.json; returns
 * whether the file changed. `stillWanted` is asked under daemon.json's
 * lock: false leaves the file as it is (an uninstall took the record away
 * meanwhile) and throws.
 */
export async function registerInDaemonJson(registration: LayerRegistration, stillWanted?: () => Promise<boolean>): Promise<boolean> {
  const { written } = await changeDaemonJson(
    registration.daemonJson,
    async (text) => {
      if (stillWanted && !(await stillWanted())) throw new RefusedChange("the layer was uninstalled meanwhile; daemon.json left as it is");
      return withRuntime(text, LAYER_RUNTIME, registration.launcher, registration.daemonJson);
    },
    { createDirectory: true },
  );
  return written !== undefined;
}

/** Whether dockerd's /info shows the layer at this registration's launcher. */
export function shows(registration: Pick<LayerRegistration, "launcher">): (info: Info) => boolean {
  return (info) => info.Runtimes?.[LAYER_RUNTIME]?.path === registration.launcher;
}

/** dockerd's pid from its pid file, or undefined when there is none. */
export async function dockerdPid(pidFile: string): Promise<number | undefined> {
  const pid = (await readOptional(pidFile))?.trim();
  return pid && /^\d{1,10}$/.test(pid) && Number(pid) > 1 ? Number(pid) : undefined;
}

export interface ReloadOptions {
  pidFile: string;
  daemonJson: string;
  info: () => Promise<Info>;
  /** What dockerd's /info must show once the reload is through. */
  loaded: (info: Info) => boolean;
  /** For messages: "load the runtime", "drop the runtime". */
  what: string;
  timeoutMs: number;
  /** Progress and what was not done (no dockerd to signal), for the operator. */
  report: (message: string) => void;
  pollMs?: number;
}

/**
 * SIGHUP to dockerd, then /info until `loaded` holds. "signalled" once it
 * does; "no-dockerd" when there is no dockerd to signal (it reads
 * daemon.json when it starts). dockerd logs why it refused a reload; what
 * the error says is whether it answered at all, and what it last answered.
 */
export async function reloadDockerd(options: ReloadOptions): Promise<"signalled" | "no-dockerd"> {
  const pid = await dockerdPid(options.pidFile);
  if (!pid) {
    options.report(`no dockerd pid in ${options.pidFile}: dockerd reads daemon.json when it starts`);
    return "no-dockerd";
  }
  try {
    process.kill(pid, "SIGHUP");
  } catch (err) {
    options.report(`dockerd (pid ${pid}) is not running (${(err as Error).message}): it reads daemon.json when it starts`);
    return "no-dockerd";
  }
  const started = Date.now();
  let lastError: unknown;
  let answers = 0;
  let reported = started;
  for (;;) {
    const info = await options.info().catch((err: unknown) => {
      lastError = err;
      return undefined;
    });
    if (info) answers++;
    if (info && options.loaded(info)) return "signalled";
    const now = Date.now();
    if (now - started > options.timeoutMs) {
      const seen = info ? `its /info still does not show it (${answers} answers)` : `its /info did not answer (${describeCause(lastError)})`;
      throw new Error(`dockerd (pid ${pid}) did not ${options.what} within ${Math.round(options.timeoutMs / 1000)} s of SIGHUP: ${seen}; dockerd's log says why if it refused ${options.daemonJson}`);
    }
    if (now - reported >= 15_000) {
      reported = now;
      options.report(`waiting for dockerd (pid ${pid}) to ${options.what}: ${Math.round((now - started) / 1000)} s of ${Math.round(options.timeoutMs / 1000)} s`);
    }
    await new Promise((r) => setTimeout(r, options.pollMs ?? 500));
  }
}
