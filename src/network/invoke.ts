/**
 * Runs one CNI plugin per the spec: CNI_* environment, the network config on
 * stdin (name and cniVersion injected, runtimeConfig for the capabilities
 * the plugin declares, prevResult chained through a list), the result or
 * error JSON on stdout. A plugin that outlives the timeout is killed.
 */
import { CridockError } from "../errors.ts";
import type { StepTimer } from "../steps.ts";
import type { NetworkConfigList, PluginConf } from "./conf.ts";
import { runProcess } from "./spawner.ts";

export type CniCommand = "ADD" | "DEL" | "CHECK";

export interface InvocationArgs {
  containerId: string;
  netnsPath: string;
  ifName: string;
  /** CNI_ARGS pairs, IgnoreUnknown first. */
  args: [string, string][];
  binDirs: string[];
}

/** One run of one plugin of a network config list: what it is told (environment, stdin) and how it is run. */
export interface PluginInvocation {
  command: CniCommand;
  list: Pick<NetworkConfigList, "name" | "cniVersion">;
  plugin: PluginConf;
  args: InvocationArgs;
  /** runtimeConfig values by capability; a plugin gets those it declares. */
  capabilityArgs: Record<string, unknown>;
  /** The previous plugin's result (ADD through a list), or the cached ADD result (DEL, CHECK); undefined: none. */
  prevResult: unknown;
  /** Cancels the run (the plugin is killed). */
  signal?: AbortSignal;
  /** Collects the run as a step of the calling operation. */
  timer?: StepTimer;
}

/** How errors and logs name an invocation. */
export function describeInvocation(inv: Pick<PluginInvocation, "command" | "list" | "plugin" | "args">): string {
  return `CNI plugin ${inv.plugin.type} ${inv.command} (network ${inv.list.name}, container ${inv.args.containerId.slice(0, 12)})`;
}

/** CNI_ARGS for a Kubernetes pod, as kubelet's dockershim passed them. */
export function podCniArgs(pod: { name: string; namespace: string; uid: string }, sandboxId: string): [string, string][] {
  return [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", pod.namespace],
    ["K8S_POD_NAME", pod.name],
    ["K8S_POD_INFRA_CONTAINER_ID", sandboxId],
    ["K8S_POD_UID", pod.uid],
  ];
}

export function pluginEnv(command: CniCommand, a: InvocationArgs): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: a.containerId,
    CNI_NETNS: a.netnsPath,
    CNI_IFNAME: a.ifName,
    CNI_PATH: a.binDirs.join(":"),
    CNI_ARGS: a.args.map(([k, v]) => `${k}=${v}`).join(";"),
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
  };
}

/**
 * The stdin config of one plugin of `list`: its own JSON with the list's
 * name and version, the runtimeConfig entries for the capabilities it
 * declares, and the previous plugin's result.
 */
export function pluginStdin(
  list: Pick<NetworkConfigList, "name" | "cniVersion">,
  plugin: PluginConf,
  capabilityArgs: Record<string, unknown>,
  prevResult: unknown,
): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin.raw, name: list.name, cniVersion: list.cniVersion };
  const runtimeConfig: Record<string, unknown> = {};
  for (const [cap, enabled] of Object.entries(plugin.capabilities ?? {})) {
    if (enabled && capabilityArgs[cap] !== undefined) runtimeConfig[cap] = capabilityArgs[cap];
  }
  if (Object.keys(runtimeConfig).length > 0) conf.runtimeConfig = runtimeConfig;
  else delete conf.runtimeConfig;
  if (prevResult !== undefined && prevResult !== null) conf.prevResult = prevResult;
  else delete conf.prevResult;
  return conf;
}

export interface ExecOptions {
  binary: string;
  env: Record<string, string>;
  stdin: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * Runs the binary (off the main thread, spawner.ts); resolves to stdout,
 * rejects with the plugin's error message and stderr.
 */
export async function execPlugin(what: string, options: ExecOptions): Promise<string> {
  const r = await runProcess({ command: options.binary, env: options.env, stdin: options.stdin, timeoutMs: options.timeoutMs, signal: options.signal });
  if (r.killedFor) {
    const code = r.killedFor.startsWith("cancelled") ? "CANCELLED" : "DEADLINE_EXCEEDED";
    throw new CridockError(code, `${what}: ${r.killedFor}${r.stderr.trim() ? `; stderr: ${r.stderr.trim()}` : ""}`);
  }
  if (r.spawnError) throw new CridockError("FAILED_PRECONDITION", `${what}: cannot run ${options.binary}`, { cause: r.spawnError });
  if (r.code === 0) return r.stdout;
  throw new CridockError("UNKNOWN", `${what} failed: ${pluginErrorText(r.stdout, r.stderr, r.code)}`);
}

/** The spec's error JSON ({code, msg, details}) when the plugin printed one, plus its stderr. */
export function pluginErrorText(stdout: string, stderr: string, exitCode: number | null): string {
  let text = "";
  try {
    const e = JSON.parse(stdout) as { code?: number; msg?: string; details?: string };
    if (e && typeof e.msg === "string") text = `${e.msg}${e.details ? `: ${e.details}` : ""} (CNI error code ${e.code ?? "?"})`;
  } catch {
    // not the error JSON
  }
  if (!text) text = stdout.trim() ? stdout.trim().slice(0, 2000) : `exit status ${exitCode}`;
  const err = stderr.trim();
  return err ? `${text}; stderr: ${err.slice(0, 2000)}` : text;
}
