/**
 * The server's answer to tools that own daemon.json. minikube (and some
 * provisioning tools) write /etc/docker/daemon.json whole on every start
 * and restart dockerd: the layer's `runtimes.cridock` entry is gone, new
 * user-namespaced pods are FAILED_PRECONDITION, and containers created
 * under the layer fail "unknown runtime" at their next start. So when the
 * server finds the layer not ready (layer.ts OciLayerLookup, which asks
 * again at once when dockerd comes back: main.ts), and install's record
 * (registration-record.ts) says the operator wants it, it registers it
 * again, with install's own steps (registration.ts): the launcher where it
 * is missing, the merge into daemon.json, SIGHUP. No container restarts.
 *
 * Why this and not dockerd's `--add-runtime` in a systemd drop-in (which a
 * daemon.json rewrite cannot remove): a flag needs a restart of dockerd to
 * take (SIGHUP reloads daemon.json only), which without live-restore stops
 * every container; a drop-in that replaces ExecStart drops the flags of the
 * distribution's unit or of the tool's own (minikube writes docker.service
 * whole, with its own ExecStart); and the same runtime named by both the
 * flag and daemon.json leaves dockerd's start to how it reconciles the two,
 * where a conflict is a dockerd that does not start: the two ways must not
 * be combined. docs/operating.md says the same for operators.
 *
 * Bounded: one attempt at a time, at most one per `minIntervalMs` (a tool
 * that restarts dockerd twice in a row gets the second attempt when the
 * interval ends, from one timer armed only then: nothing runs while the
 * layer is there). An attempt that fails doubles the interval, up to an
 * hour, until one succeeds: a dockerd that never takes the registration
 * (it reads another daemon.json than install's) is not signalled and
 * polled for ever. Each attempt is logged with its reason and counted
 * (`counts`, cridock_oci_layer_reregistrations_total). Off with
 * --oci-layer-reregister=false.
 */
import { rm } from "node:fs/promises";
import type { DockerInfo } from "../docker/types.ts";
import { describeCause } from "../errors.ts";
import type { Logger } from "../log.ts";
import { RefusedChange } from "./daemon-config.ts";
import { readRecord, type LayerRegistration } from "./registration-record.ts";
import { ensureLauncher, refuseLayerAsDefault, registerInDaemonJson, reloadDockerd, shows } from "./registration.ts";

export type ReregistrationResult = "registered" | "failed" | "refused";

export interface ReregisterOptions {
  /** Install's record; the server's is <root-directory>/oci-layer.json. */
  recordPath: string;
  info: () => Promise<Pick<DockerInfo, "Runtimes" | "DefaultRuntime">>;
  /** The command that runs this cridock, for a launcher that must be written again. */
  cridock: readonly string[];
  log: Logger;
  /** Called once dockerd shows the layer again (the lookup drops its cached absence). */
  onRegistered?: () => void;
  minIntervalMs?: number;
  reloadTimeoutMs?: number;
  pollMs?: number;
}

export const DEFAULT_MIN_INTERVAL_MS = 30_000;
/** The longest wait between attempts after failures. */
const MAX_INTERVAL_MS = 3_600_000;

export class LayerReregistrar {
  private running?: Promise<void>;
  private lastAttempt = Number.NEGATIVE_INFINITY;
  /** Attempts that failed or were refused since the last success: each doubles the interval. */
  private failuresInARow = 0;
  private deferred?: NodeJS.Timeout;
  private pendingReason?: string;
  private readonly totals: Record<ReregistrationResult, number> = { registered: 0, failed: 0, refused: 0 };

  constructor(private readonly options: ReregisterOptions) {}

  /** Attempts so far, by result (a copy). */
  counts(): Record<ReregistrationResult, number> {
    return { ...this.totals };
  }

  /**
   * The lookup found the layer not ready, for `reason`. Re-registers now, or
   * once the interval since the last attempt ends; resolves when this call's
   * attempt (if any) is through. Never throws.
   */
  layerNotReady(reason: string): Promise<void> {
    if (this.running) return this.running;
    const base = this.options.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS;
    const interval = Math.min(base * 2 ** Math.min(this.failuresInARow, 20), Math.max(base, MAX_INTERVAL_MS));
    // Timed from the attempt's end: one that waited out dockerd's reload counts from then.
    const wait = this.lastAttempt + interval - Date.now();
    if (wait > 0) {
      this.pendingReason = reason;
      this.deferred ??= setTimeout(() => {
        this.deferred = undefined;
        void this.layerNotReady(this.pendingReason ?? reason);
      }, wait);
      this.deferred.unref?.();
      return Promise.resolve();
    }
    this.lastAttempt = Date.now();
    this.running = this.attempt(reason).finally(() => {
      this.running = undefined;
      this.lastAttempt = Date.now();
    });
    return this.running;
  }

  stop(): void {
    if (this.deferred) clearTimeout(this.deferred);
    this.deferred = undefined;
  }

  private count(result: ReregistrationResult): void {
    this.totals[result]++;
    this.failuresInARow = result === "registered" ? 0 : this.failuresInARow + 1;
  }

  private async attempt(reason: string): Promise<void> {
    const { log, recordPath } = this.options;
    let registration: LayerRegistration | undefined;
    try {
      registration = await readRecord(recordPath);
    } catch (err) {
      this.count("refused");
      log.warn({ reason, record: recordPath, err: describeCause(err) }, "the OCI runtime layer is gone, and install's record of it cannot be trusted: not registering it again; run `cridock oci-layer install`");
      return;
    }
    // No record: never installed, or uninstalled (or CRIDOCK_OCI_LAYER=no). Not ours to add.
    if (!registration) return;
    const fields = { reason, launcher: registration.launcher, daemonJson: registration.daemonJson };
    try {
      refuseLayerAsDefault(await this.options.info().catch(() => undefined));
      const wroteLauncher = await ensureLauncher(registration, this.options.cridock, "keep");
      // Under daemon.json's lock: an uninstall that took the record away meanwhile wins.
      const changed = await registerInDaemonJson(registration, async () => (await readRecord(recordPath).catch(() => undefined)) !== undefined).catch(async (err: unknown) => {
        // A launcher written for a registration that did not happen goes again.
        if (wroteLauncher) await rm(registration.launcher, { force: true }).catch(() => undefined);
        throw err;
      });
      const loaded = shows(registration);
      const info = await this.options.info().catch(() => undefined);
      if (!changed && info && loaded(info)) {
        if (!wroteLauncher) {
          // Registered, and still not ready (the real runtime is gone): nothing a registration can mend.
          this.count("failed");
          log.warn(fields, "the OCI runtime layer is registered and still not ready; `cridock oci-layer install` says why");
          return;
        }
      } else {
        const reloaded = await reloadDockerd({
          pidFile: registration.dockerPidFile,
          daemonJson: registration.daemonJson,
          info: this.options.info,
          loaded,
          what: "load the runtime",
          timeoutMs: this.options.reloadTimeoutMs ?? 120_000,
          pollMs: this.options.pollMs,
          report: (message) => log.info(fields, message),
        });
        if (reloaded === "no-dockerd") {
          this.count("failed");
          log.warn({ ...fields, daemonJsonChanged: changed }, "registered the OCI runtime layer in daemon.json again; dockerd could not be signalled and loads it when it starts");
          return;
        }
      }
      this.count("registered");
      log.warn({ ...fields, daemonJsonChanged: changed, launcherWritten: wroteLauncher }, "registered the OCI runtime layer with dockerd again (something had removed it; --oci-layer-reregister=false turns this off)");
      this.options.onRegistered?.();
    } catch (err) {
      this.count(err instanceof RefusedChange ? "refused" : "failed");
      log.warn({ ...fields, err: describeCause(err) }, "could not register the OCI runtime layer with dockerd again");
    }
  }
}
