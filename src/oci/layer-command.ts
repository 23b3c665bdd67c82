/**
 * `cridock oci-layer install | uninstall | status`: puts cridock's OCI
 * runtime layer (launcher.ts) in front of dockerd's runc, or takes it away.
 *
 * install writes the launcher, registers it in daemon.json's `runtimes`
 * (merged with the operator's settings: daemon-config.ts; the file kept as
 * an operator keeps it: daemon-json-file.ts), records what it registered
 * for the server's re-registration (registration-record.ts) and sends
 * dockerd SIGHUP, which reloads the runtimes without restarting dockerd or
 * any container; it then waits until /info lists the runtime. Those steps
 * live in registration.ts, which the server's re-registration runs too.
 * uninstall removes the record, then the registration the same way; the
 * launcher file stays while a container still runs under it (containerd's
 * shim calls it to stop and delete that container), and goes otherwise,
 * with what cridock left in the edits directory (edits-dir-removal.ts).
 * Both are idempotent.
 */
import { access, constants, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import process from "node:process";
import { parseArgs } from "node:util";
import { DockerClient } from "../docker/client.ts";
import type { DockerInfo } from "../docker/types.ts";
import { createLogger } from "../log.ts";
import { withoutRuntime } from "./daemon-config.ts";
import { changeDaemonJson } from "./daemon-json-file.ts";
import { removeEditsDir } from "./edits-dir-removal.ts";
import { isCommandName } from "./launcher.ts";
import { inspectLayer, LAYER_RUNTIME } from "./layer.ts";
import { DEFAULT_RECORD, removeRecord, writeRecord, type LayerRegistration } from "./registration-record.ts";
import { dockerdPid, ensureLauncher, readOptional, refuseLayerAsDefault, registerInDaemonJson, reloadDockerd, shows, type ReloadOptions } from "./registration.ts";
import { describeCause } from "../errors.ts";
import { selfCommand } from "../self-command.ts";

const OPTIONS = {
  "docker-endpoint": { type: "string", default: "unix:///var/run/docker.sock" },
  "daemon-json": { type: "string", default: "/etc/docker/daemon.json" },
  "docker-pid-file": { type: "string", default: "/var/run/docker.pid" },
  launcher: { type: "string", default: "/var/lib/cridock/oci-runtime" },
  "edits-dir": { type: "string", default: "/run/cridock/oci-edits" },
  "rootfs-dir": { type: "string", default: "/run/cridock-rootfs" },
  runtime: { type: "string" },
  registration: { type: "string", default: DEFAULT_RECORD },
  "no-reload": { type: "boolean", default: false },
  "reload-timeout": { type: "string", default: "120" },
  help: { type: "boolean", default: false },
} as const;

const USAGE = `Usage: cridock oci-layer install|uninstall|status [flags]

Registers cridock's OCI runtime layer with dockerd (daemon.json "runtimes",
reloaded with SIGHUP: no container restarts), removes it, or says whether
dockerd has it. With the layer, what Docker's API cannot say (cgroup v2
unified settings) is in force before a container's first instruction.

  --docker-endpoint URL  dockerd's socket (default unix:///var/run/docker.sock)
  --daemon-json FILE     dockerd's configuration (default /etc/docker/daemon.json)
  --docker-pid-file FILE dockerd's pid file, for SIGHUP (default /var/run/docker.pid)
  --launcher FILE        where the launcher is written (default /var/lib/cridock/oci-runtime)
  --edits-dir DIR        where cridock leaves spec edits (default /run/cridock/oci-edits)
  --rootfs-dir DIR       where the layer mounts the idmapped rootfs of pods in user namespaces
                         (default /run/cridock-rootfs; it and its parents must be searchable by all)
  --runtime FILE         the real OCI runtime (default: dockerd's default runtime; runc by
                         name, found on containerd's shim's PATH at each call, as Docker's is)
  --registration FILE    where install records what it registered, for cridock's re-registration
                         after a tool rewrote daemon.json (default ${DEFAULT_RECORD}, in cridock's
                         default --root-directory; uninstall removes it)
  --no-reload            write the files, signal nothing (dockerd reads them when it starts)
  --reload-timeout SECS  how long to wait for dockerd to show the reload in /info (default 120)`;

type Flags = { [K in keyof typeof OPTIONS]: (typeof OPTIONS)[K] extends { type: "boolean" } ? boolean : string | undefined };

export async function runOciLayer(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    process.stderr.write(`cridock oci-layer: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const flags = parsed.values as Flags;
  const [action, ...extra] = parsed.positionals;
  if (flags.help) {
    process.stdout.write(USAGE + "\n");
    return 0;
  }
  if (!action || extra.length > 0 || !["install", "uninstall", "status"].includes(action)) {
    process.stderr.write(`cridock oci-layer: say install, uninstall or status\n\n${USAGE}\n`);
    return 2;
  }
  const reloadTimeoutS = Number(flags["reload-timeout"]);
  if (!Number.isInteger(reloadTimeoutS) || reloadTimeoutS < 1 || reloadTimeoutS > 3600) {
    process.stderr.write(`cridock oci-layer: --reload-timeout must be whole seconds from 1 to 3600, not ${JSON.stringify(flags["reload-timeout"])}\n`);
    return 2;
  }
  // /info runs runc, containerd and docker-init for their versions: on a
  // loaded node one answer alone can take tens of seconds.
  const docker = new DockerClient({ endpoint: flags["docker-endpoint"]!, requestTimeoutMs: 60_000, logger: createLogger("error") });
  try {
    if (action === "install") await install(docker, flags, reloadTimeoutS);
    else if (action === "uninstall") await uninstall(docker, flags, reloadTimeoutS);
    else return await status(docker);
    return 0;
  } catch (err) {
    process.stderr.write(`cridock oci-layer ${action}: ${describeCause(err)}\n`);
    return 1;
  } finally {
    await docker.close();
  }
}

async function dockerInfo(docker: DockerClient): Promise<DockerInfo | undefined> {
  return docker.info().catch(() => undefined);
}

/** `name` on dockerd's PATH (from its environment), which containerd's (whose shim runs runc) is on a node as a rule. */
async function resolveOnDockerdPath(name: string, pidFile: string): Promise<string | undefined> {
  if (name.startsWith("/")) return name;
  let path = process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  const pid = await dockerdPid(pidFile);
  if (pid) {
    const environ = await readOptional(`/proc/${pid}/environ`).catch(() => undefined);
    const fromDockerd = environ?.split("\0").find((e) => e.startsWith("PATH="));
    if (fromDockerd) path = fromDockerd.slice(5);
  }
  for (const dir of path.split(":")) {
    if (!dir.startsWith("/")) continue;
    const candidate = join(dir, name);
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate;
  }
  return undefined;
}

/**
 * The launcher's real runtime: --runtime as given, else dockerd's default
 * runtime. A path stays that path; a bare name (Docker's `runc`) stays a
 * name, which the launcher looks up at each call on the PATH containerd's
 * shim gives it, as the shim does for Docker's own runc: whichever engine
 * runs the node later, its runc runs the layer's containers (launcher.ts).
 * The name must be found on dockerd's PATH now, so that a node without it
 * is told at install. A default runtime that is the layer itself is refused.
 */
async function realRuntime(info: DockerInfo | undefined, flags: Flags): Promise<string> {
  if (flags.runtime === LAYER_RUNTIME) throw new Error(`--runtime ${LAYER_RUNTIME} names the layer itself: name the real runtime (runc)`);
  if (flags.runtime) return flags.runtime;
  refuseLayerAsDefault(info);
  const name = info ? (info.Runtimes?.[info.DefaultRuntime ?? "runc"]?.path ?? "runc") : "runc";
  const found = await resolveOnDockerdPath(name, flags["docker-pid-file"]!);
  if (!found) throw new Error(`dockerd's runtime ${name} was not found on its PATH; name it with --runtime`);
  return isCommandName(name) ? name : found;
}

function reloadOptions(docker: DockerClient, flags: Flags, timeoutS: number, loaded: (info: DockerInfo) => boolean, what: string): ReloadOptions {
  return {
    pidFile: flags["docker-pid-file"]!,
    daemonJson: flags["daemon-json"]!,
    info: () => docker.info(),
    loaded: loaded as ReloadOptions["loaded"],
    what,
    timeoutMs: timeoutS * 1000,
    report: (message) => process.stderr.write(`cridock oci-layer: ${message}\n`),
  };
}

async function install(docker: DockerClient, flags: Flags, reloadTimeoutS: number): Promise<void> {
  const registration: LayerRegistration = {
    launcher: flags.launcher!,
    daemonJson: flags["daemon-json"]!,
    dockerPidFile: flags["docker-pid-file"]!,
    delegate: await realRuntime(await dockerInfo(docker), flags),
    editsDir: flags["edits-dir"]!,
    rootfsDir: flags["rootfs-dir"]!,
  };
  const hadLauncher = await access(registration.launcher).then(() => true, () => false);
  await ensureLauncher(registration, selfCommand(), "write");
  let changed: boolean;
  try {
    changed = await registerInDaemonJson(registration);
  } catch (err) {
    // Refused (or failed): a launcher this run made and nothing registers goes again.
    if (!hadLauncher) await rm(registration.launcher, { force: true }).catch(() => undefined);
    throw err;
  }
  // The operator's intent, for the server's re-registration (registration-record.ts); once daemon.json has taken the entry.
  const record = flags.registration!;
  await mkdir(dirname(record), { recursive: true, mode: 0o755 });
  await writeRecord(record, registration);
  const loaded = shows(registration);
  // A reinstall (a package upgrade) over a dockerd that has it already signals nothing.
  const info = changed ? undefined : await dockerInfo(docker);
  if (!flags["no-reload"] && (!info || !loaded(info))) await reloadDockerd(reloadOptions(docker, flags, reloadTimeoutS, loaded, "load the runtime"));
  process.stdout.write(`cridock oci-layer: runtime "${LAYER_RUNTIME}" → ${registration.launcher} (real runtime ${registration.delegate}) registered in ${registration.daemonJson}\n`);
}

async function containersUsing(docker: DockerClient, runtime: string): Promise<string[]> {
  const using: string[] = [];
  for (const c of await docker.listContainers()) {
    const inspect = await docker.inspectContainer(c.Id).catch(() => undefined);
    if (inspect?.HostConfig.Runtime === runtime) using.push(c.Id.slice(0, 12));
  }
  return using;
}

async function uninstall(docker: DockerClient, flags: Flags, reloadTimeoutS: number): Promise<void> {
  const daemonJson = flags["daemon-json"]!;
  // The record goes under daemon.json's lock, with the entry (and not when the change is refused): a server
  // re-registering checks the record under the same lock, so it never re-adds what this removes.
  await changeDaemonJson(daemonJson, async (text) => {
    const updated = withoutRuntime(text, LAYER_RUNTIME, daemonJson);
    await removeRecord(flags.registration!);
    return updated;
  });
  if (!flags["no-reload"]) await reloadDockerd(reloadOptions(docker, flags, reloadTimeoutS, (info) => !info.Runtimes?.[LAYER_RUNTIME], "drop the runtime"));
  const using = (await dockerInfo(docker)) ? await containersUsing(docker, LAYER_RUNTIME) : [];
  if (using.length > 0) {
    process.stdout.write(`cridock oci-layer: unregistered; ${flags.launcher} stays while ${using.length} container(s) created under it exist (${using.slice(0, 5).join(", ")})\n`);
    return;
  }
  await rm(flags.launcher!, { force: true });
  const left = await removeEditsDir(flags["edits-dir"]!);
  process.stdout.write(`cridock oci-layer: unregistered from ${daemonJson}; ${flags.launcher} removed${left ? `; ${left}` : ""}\n`);
}

async function status(docker: DockerClient): Promise<number> {
  const info = await dockerInfo(docker);
  if (!info) {
    process.stdout.write("dockerd does not answer\n");
    return 1;
  }
  const state = await inspectLayer(info);
  process.stdout.write(state.ready ? `ready: runtime "${state.layer.runtime}" → ${state.layer.launcher}, real runtime ${state.layer.delegate}\n` : `not ready: ${state.reason}\n`);
  return state.ready ? 0 : 1;
}
