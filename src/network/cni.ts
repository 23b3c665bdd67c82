/**
 * Pod networking through CNI plugins. The network config is (re)loaded from
 * --cni-conf-dir when it changes (conf-watch.ts: a watch on the directory,
 * a 2 s retry while no valid config is loaded, a 60 s safety reload once one
 * is); NetworkReady stays false, with the
 * reason, until a valid one is loaded. setUp brings the pod's loopback up
 * (running the loopback plugin only when the namespace's lo is not already
 * up with 127.0.0.1, as Docker's network mode none leaves it) and runs ADD
 * through the config's plugin list; tearDown runs DEL in reverse with the
 * config and args cached at ADD time.
 */
import { readdir } from "node:fs/promises";
import process from "node:process";
import { join } from "node:path";
import { CridockError, describeCause, failedPrecondition } from "../errors.ts";
import type { Logger } from "../log.ts";
import { CniCache, type CacheEntry } from "./cache.ts";
import { findPlugin, loadNetworkConfig, parseNetworkConfig, type NetworkConfigList, type PluginConf } from "./conf.ts";
import { describeInvocation, execPlugin, pluginEnv, pluginStdin, podCniArgs, type InvocationArgs, type PluginInvocation } from "./invoke.ts";
import type { NetworkReadiness, PodNetwork, PodNetworkAttachment, PodNetworkRequest, TearDownOptions } from "./plugin.ts";
import { liveNetns, loopbackIsUp } from "./netns.ts";
import { parseResult, podIps } from "./result.ts";
import { resultFromAddresses } from "./pod-ips.ts";
import { timed } from "../steps.ts";
import { ConfWatch } from "./conf-watch.ts";

export interface CniNetworkOptions {
  confDir: string;
  binDirs: string[];
  cacheDir: string;
  log: Logger;
  podCidr?: string;
  pluginTimeoutMs?: number;
  /** Safety reloads while no valid config is loaded, and once one is (a watch reports changes at once). */
  reloadIntervalMs?: { notReady: number; ready: number };
  /** Told of each ADD (setUp) and each DEL that ran plugins (tearDown), with its latency; for metrics. */
  onOperation?: (operation: "ADD" | "DEL", seconds: number, ok: boolean) => void;
}

const IFNAME = "eth0";
const LOOPBACK: { list: Pick<NetworkConfigList, "name" | "cniVersion">; plugin: PluginConf } = {
  list: { name: "cni-loopback", cniVersion: "1.0.0" },
  plugin: { type: "loopback", raw: { type: "loopback" } },
};

export class CniNetwork implements PodNetwork {
  readonly kind = "cni" as const;
  private current: NetworkConfigList | undefined;
  private loopbackPath: string | undefined;
  private problems: string[] = ["CNI config not loaded yet"];
  private podCidr: string;
  private confWatch: ConfWatch | undefined;
  private readonly cache: CniCache;
  private readonly log: Logger;
  private readonly timeoutMs: number;

  constructor(private readonly options: CniNetworkOptions) {
    this.podCidr = options.podCidr ?? "";
    this.cache = new CniCache(options.cacheDir);
    this.log = options.log.child({ component: "cni" });
    this.timeoutMs = options.pluginTimeoutMs ?? 120_000;
  }

  /** Loads the config once and keeps it current in the background. */
  async start(): Promise<void> {
    // Temporaries of a cache write interrupted by kill -9 (written before this process started).
    const started = new Date(Date.now() - process.uptime() * 1000);
    const swept = await this.cache.sweepTemporaries(started).catch((err) => {
      this.log.warn({ err, cacheDir: this.options.cacheDir }, "cannot sweep temporary files of the CNI result cache");
      return [];
    });
    if (swept.length > 0) this.log.info({ files: swept }, "removed temporary CNI cache files left by an interrupted write");
    this.confWatch = new ConfWatch({
      dir: this.options.confDir,
      reload: async () => {
        await this.reload();
        return this.current !== undefined;
      },
      log: this.log,
      pollMs: this.options.reloadIntervalMs,
    });
    await this.confWatch.start();
  }

  async close(): Promise<void> {
    this.confWatch?.close();
  }

  async reload(): Promise<void> {
    try {
      const [loaded, loopback] = await Promise.all([
        loadNetworkConfig(this.options.confDir, this.options.binDirs),
        findPlugin("loopback", this.options.binDirs),
      ]);
      const problems = [...loaded.problems];
      if (!loopback) problems.push(`the loopback plugin is not in ${this.options.binDirs.join(", ")}`);
      const next = loopback ? loaded.config : undefined;
      if (next?.file !== this.current?.file || next?.bytes !== this.current?.bytes) {
        if (next) this.log.info({ file: next.file, network: next.name, plugins: next.plugins.map((p) => p.type) }, "loaded CNI network config");
        else this.log.warn({ problems }, "no valid CNI network config");
      }
      this.current = next;
      this.loopbackPath = loopback;
      this.problems = problems;
    } catch (err) {
      this.log.error({ err }, "reloading the CNI config failed");
    }
  }

  /** The config in use (for status and tests). */
  config(): NetworkConfigList | undefined {
    return this.current;
  }

  readiness(): NetworkReadiness {
    // A config whose plugins take ipRanges gets the pod range from kubelet (the node's podCIDR): until
    // it has come, an ADD has no range, so the network is not ready yet (containerd's template config
    // is not even written until then). kubelet sends the CIDR whatever the runtime's readiness.
    if (this.current && !this.podCidr && this.current.plugins.some((p) => p.capabilities?.ipRanges === true)) {
      return {
        ready: false,
        reason: "NetworkPluginNotReady",
        message: `CNI network ${this.current.name} takes the pod CIDR (ipRanges) and kubelet has not sent one yet (UpdateRuntimeConfig; --pod-cidr sets one until then)`,
      };
    }
    if (this.current) return { ready: true };
    return {
      ready: false,
      reason: "NetworkPluginNotReady",
      message: `cni config uninitialized: ${this.problems.join("; ")}`,
    };
  }

  setPodCidr(cidr: string): void {
    this.podCidr = cidr;
  }

  private capabilityArgs(request: PodNetworkRequest): Record<string, unknown> {
    const caps: Record<string, unknown> = {};
    const published = request.portMappings.filter((pm) => pm.hostPort > 0);
    if (published.length > 0) {
      caps.portMappings = published.map((pm) => ({
        hostPort: pm.hostPort,
        containerPort: pm.containerPort,
        protocol: pm.protocol,
        hostIP: pm.hostIp,
      }));
    }
    if (request.bandwidth) caps.bandwidth = request.bandwidth;
    if (this.podCidr) caps.ipRanges = this.podCidr.split(",").map((subnet) => [{ subnet: subnet.trim() }]);
    if (request.dns) caps.dns = { servers: request.dns.servers, searches: request.dns.searches, options: request.dns.options };
    return caps;
  }

  async setUp(request: PodNetworkRequest, signal?: AbortSignal): Promise<PodNetworkAttachment> {
    return this.timed("ADD", () => this.add(request, signal));
  }

  private async timed<T>(operation: "ADD" | "DEL", run: () => Promise<T>): Promise<T> {
    const report = this.options.onOperation;
    if (!report) return run();
    const started = performance.now();
    try {
      const result = await run();
      report(operation, (performance.now() - started) / 1000, true);
      return result;
    } catch (err) {
      report(operation, (performance.now() - started) / 1000, false);
      throw err;
    }
  }

  private async add(request: PodNetworkRequest, signal?: AbortSignal): Promise<PodNetworkAttachment> {
    const list = this.current;
    if (!list || !this.loopbackPath) throw failedPrecondition(`pod network is not ready: ${this.readiness().message}`);
    const args: InvocationArgs = {
      containerId: request.sandboxId,
      netnsPath: request.netnsPath,
      ifName: IFNAME,
      args: podCniArgs(request.pod, request.sandboxId),
      binDirs: this.options.binDirs,
    };
    const timer = request.timer;
    const loUp = request.pid !== undefined && (await timed(timer, "cni.loopback.check", () => loopbackIsUp(request.pid!)));
    if (!loUp) {
      await this.invoke({ command: "ADD", ...LOOPBACK, args: { ...args, ifName: "lo" }, capabilityArgs: {}, prevResult: undefined, signal, timer });
    }
    const capabilityArgs = this.capabilityArgs(request);
    const entry: CacheEntry = {
      kind: "cniCacheV1",
      containerId: request.sandboxId,
      ifName: IFNAME,
      networkName: list.name,
      config: Buffer.from(list.bytes).toString("base64"),
      cniArgs: args.args,
      capabilityArgs,
      netns: request.netnsPath,
      result: null,
    };
    await timed(timer, "cni.cache.write", () => this.cache.write(entry));
    let prev: unknown;
    for (const plugin of list.plugins) {
      prev = await this.invoke({ command: "ADD", list, plugin, args, capabilityArgs, prevResult: prev, signal, timer });
      // Cache each step's result: if a later plugin fails, DEL still tells the
      // earlier ones (firewall, portmap) what they set up.
      await timed(timer, "cni.cache.write", () => this.cache.write({ ...entry, result: prev }));
    }
    const result = parseResult(JSON.stringify(prev ?? {}), list.cniVersion);
    const ips = podIps(result);
    this.log.debug({ sandboxId: request.sandboxId, network: list.name, ips }, "CNI ADD done");
    return { networkName: list.name, ips, result: prev };
  }

  async adopt(
    request: PodNetworkRequest,
    cniArgs: [string, string][],
    createFrom: { addresses: string[] } | undefined,
  ): Promise<{ networkName: string; result: unknown } | undefined> {
    const found = await this.findCacheEntry(request.sandboxId);
    if (found) {
      // libcni's entry has what DEL needs; point it at our handle (the pid it names will go).
      const netns = request.netnsPath || found.netns || "";
      await this.cache.write({ ...found, netns, cniArgs: found.cniArgs ?? cniArgs, capabilityArgs: found.capabilityArgs ?? {} });
      return { networkName: found.networkName, result: found.result ?? null };
    }
    if (!createFrom) return undefined;
    const list = this.current;
    if (!list) throw failedPrecondition(`cannot take over the network of pod sandbox ${request.sandboxId}: ${this.readiness().message}`);
    await this.cache.write({
      kind: "cniCacheV1",
      containerId: request.sandboxId,
      ifName: IFNAME,
      networkName: list.name,
      config: Buffer.from(list.bytes).toString("base64"),
      cniArgs,
      capabilityArgs: this.capabilityArgs(request),
      netns: request.netnsPath,
      result: resultFromAddresses(list.cniVersion, request.netnsPath, IFNAME, createFrom.addresses),
    });
    this.log.info({ sandboxId: request.sandboxId, network: list.name }, "no CNI cache entry for an adopted pod; DEL will use the current config");
    return { networkName: list.name, result: null };
  }

  async tearDown(request: PodNetworkRequest, options: TearDownOptions = {}): Promise<string[]> {
    const entry = await this.findCacheEntry(request.sandboxId);
    // The entry is written before the first ADD: without one, no plugin ever ran for this pod.
    if (!entry) return [];
    return this.timed("DEL", () => this.del(request, entry, options.force === true));
  }

  /**
   * DEL through every plugin of the cached list, in reverse, past a failing
   * one (DEL is idempotent, so the rest still release their part, the IP
   * above all). The spec has DEL succeed for resources already gone: a
   * namespace that no longer exists is passed as an empty CNI_NETNS, and a
   * plugin no longer installed has nothing left that could undo its part,
   * so it is skipped. Any other failure fails the call and keeps the cache
   * entry for the next DEL, unless `force`, when the entry is dropped and
   * the failures returned.
   */
  private async del(request: PodNetworkRequest, entry: CacheEntry, force: boolean): Promise<string[]> {
    const forget = async (failures: string[]) => {
      await this.cache.remove(entry.networkName, request.sandboxId, IFNAME);
      return failures;
    };
    let list: NetworkConfigList;
    try {
      list = parseNetworkConfig(`cached config of ${entry.networkName}`, Buffer.from(entry.config, "base64").toString("utf8"));
    } catch (err) {
      const failure = new CridockError("INTERNAL", `CNI DEL for sandbox ${request.sandboxId}: the cached network config is unusable`, { cause: err });
      if (force) return forget([`${failure.message}: ${describeCause(err)}`]);
      throw failure;
    }
    const recorded = request.netnsPath || entry.netns || "";
    const netnsPath = await liveNetns(recorded);
    if (recorded && !netnsPath) this.log.info({ sandboxId: request.sandboxId, netns: recorded }, "the pod's network namespace is gone; CNI DEL runs without CNI_NETNS");
    const args: InvocationArgs = { containerId: request.sandboxId, netnsPath, ifName: IFNAME, args: entry.cniArgs, binDirs: this.options.binDirs };
    // DEL carries the ADD result as prevResult from spec 0.4.0 on.
    const prev = list.cniVersion.startsWith("0.3.") ? undefined : (entry.result ?? undefined);
    const failures: string[] = [];
    for (const plugin of [...list.plugins].reverse()) {
      const binary = await findPlugin(plugin.type, this.options.binDirs);
      if (!binary) {
        this.log.warn({ sandboxId: request.sandboxId, network: list.name, plugin: plugin.type }, "CNI plugin no longer installed: its DEL is skipped");
        continue;
      }
      try {
        await this.run({ command: "DEL", list, plugin, args, capabilityArgs: entry.capabilityArgs, prevResult: prev, timer: request.timer }, binary);
      } catch (err) {
        failures.push(describeCause(err));
      }
    }
    if (failures.length > 0 && !force) {
      throw new CridockError("UNKNOWN", `CNI DEL for sandbox ${request.sandboxId} (network ${list.name}): ${failures.join("; ")}`);
    }
    this.log.debug({ sandboxId: request.sandboxId, network: list.name, failures }, "CNI DEL done");
    return forget(failures);
  }

  private async findCacheEntry(containerId: string): Promise<CacheEntry | undefined> {
    let names: string[];
    try {
      names = await readdir(join(this.options.cacheDir, "results"));
    } catch {
      return undefined;
    }
    const suffix = `-${containerId}-${IFNAME}`;
    for (const name of names) {
      if (!name.endsWith(suffix)) continue;
      const entry = await this.cache.read(name.slice(0, -suffix.length), containerId, IFNAME);
      if (entry) return entry;
    }
    return undefined;
  }

  private async invoke(inv: PluginInvocation): Promise<unknown> {
    const binary = await findPlugin(inv.plugin.type, this.options.binDirs);
    if (!binary) throw failedPrecondition(`${describeInvocation(inv)}: plugin binary not found in ${this.options.binDirs.join(", ")}`);
    return this.run(inv, binary);
  }

  /** One plugin run with its binary already found; ADD's validated result, else undefined. */
  private async run(inv: PluginInvocation, binary: string): Promise<unknown> {
    const what = describeInvocation(inv);
    const stdin = JSON.stringify(pluginStdin(inv.list, inv.plugin, inv.capabilityArgs, inv.prevResult));
    const exec = () => execPlugin(what, { binary, env: pluginEnv(inv.command, inv.args), stdin, timeoutMs: this.timeoutMs, signal: inv.signal });
    const stdout = await timed(inv.timer, `cni.${inv.command.toLowerCase()}.${inv.plugin.type}`, exec, 1);
    if (inv.command !== "ADD") return undefined;
    try {
      // Validate now; pass the plugin's own JSON on as the next prevResult.
      parseResult(stdout, inv.list.cniVersion);
      return JSON.parse(stdout);
    } catch (err) {
      throw new CridockError("UNKNOWN", `${what}: unusable result`, { cause: err });
    }
  }
}
