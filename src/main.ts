/**
 * cridock entry point: flags → config → components → serve. SIGTERM/SIGINT
 * stop accepting calls, let in-flight ones finish (bounded), remove the
 * socket and exit 0. startCridock composes the start from steps that live
 * in the modules owning them; this file keeps their order, the start's
 * timing and the process's signals.
 */
// First: V8's optimizing compiler stays off while the other modules load and cridock starts.
import { resumeOptimizingCompiler } from "./startup-tiering.ts";
import { capYoungGeneration } from "./young-generation.ts";
import process from "node:process";
import { ConfigError, parseConfig, type Config } from "./config.ts";
import { createLogger, type Logger } from "./log.ts";
import type { DockerClient } from "./docker/client.ts";
import { CriServer, prepareSocketPath } from "./cri/server.ts";
import { createCriServer, serveOnceReconciled } from "./cri/setup.ts";
import { StartupGate } from "./cri/startup-gate.ts";
import type { ImageManager } from "./runtime/image/manager.ts";
import { openDockerClient } from "./runtime/docker-client.ts";
import { createPodViews, createRuntimeDomain } from "./runtime/domain.ts";
import { reconcileAtStart } from "./runtime/reconcile.ts";
import { startPodNetwork } from "./network/setup.ts";
import { PodCidrStore } from "./store/pod-cidr.ts";
import { createStreaming } from "./streaming/setup.ts";
import { countObjects, metricsWiring } from "./metrics/setup.ts";
import { notifySystemd } from "./systemd/notify.ts";
import { runCheck } from "./check/command.ts";
import { describeCause } from "./errors.ts";
import { versionLine } from "./version.ts";
import { StepTimer } from "./steps.ts";

/** The start's budget after its module load (see startCridock); the reconciliation's share of it is bounded in cri/setup.ts. */
const START_BUDGET_AFTER_LOAD_MS = 120_000;

/** Everything main() wires together; tests build it too. */
export interface Cridock {
  config: Config;
  log: Logger;
  docker: DockerClient;
  images: ImageManager;
  server: CriServer;
  /** The start's reconciliation with Docker; serving may begin before it settles, and its failure ends the process. */
  reconciled: Promise<void>;
  stop(): Promise<void>;
}

export async function startCridock(config: Config, log: Logger): Promise<Cridock> {
  // Where a start's time goes, logged once serving: on a slow or loaded node
  // the start can take seconds, and kubelet and crictl wait for it.
  const startup = new StepTimer("start");
  // The process's own start and the module graph's load, before this function ran.
  startup.record("modules", performance.now());
  // systemd's start timeout (TimeoutStartSec) has covered the process's own start and
  // module load; the rest of the start gets a budget of its own from here (sd_notify's
  // EXTEND_TIMEOUT_USEC). On a starved node the module load alone took 35 to 58 s and
  // the rest 30 to 77 s, and systemd killed a start that would have served 3 s later.
  void notifySystemd({ STATUS: "starting", EXTEND_TIMEOUT_USEC: String(START_BUDGET_AFTER_LOAD_MS * 1000) }, log);
  // Before anything else: a live instance on this socket owns the root
  // directory, its sandboxes and their networks; recovery, a streaming
  // server or log writers started here would act on its state.
  // (systemd owns an activated socket: nothing to check there.)
  if (!config.socketActivated) await prepareSocketPath(config.listenSocket);
  const metrics = await metricsWiring(config, log);
  const docker = openDockerClient(config, log, metrics.dockerObserver);
  const podCidrs = new PodCidrStore(config.rootDirectory);
  const network = await startup.time("network", async () => startPodNetwork(config, log, await podCidrs.load(), metrics.onCniOperation));
  const runtime = await createRuntimeDomain({ settings: config, log, docker, network, podCidrs, onPull: metrics.onPull });
  // What the last run left, reconciled with Docker before pods are served (cri/startup-gate.ts);
  // each step is timed for the start's log and named for Status while the gate is closed.
  const gate = new StartupGate("scratch.sweep");
  const reconciled = reconcileAtStart(runtime, docker, network, config, log, (name, fn) => {
    gate.step(name);
    return startup.time(name, fn);
  });
  const views = createPodViews(runtime, docker, log);
  const streaming = createStreaming(config, log, docker, runtime.sandboxes);
  await startup.time("streaming", () => streaming.server.start());
  const server = createCriServer(config, log, { runtime, views, streaming, gate, wrap: (service, table) => metrics.handlers(service, table) });
  const { sandboxes, containers, logFollowers, images } = runtime;
  await metrics.start({
    objectCounts: () => countObjects(() => sandboxes.list(), () => containers.list({ id: "", sandboxId: "", labelSelector: {} })),
    held: () => ({ logFollowers: logFollowers.counts(), dockerConnections: docker.connectionCounts() }),
    ociLayerReregistrations: runtime.ociLayerReregistrar && (() => runtime.ociLayerReregistrar!.counts()),
  });
  await serveOnceReconciled(server, gate, reconciled, startup, log);
  // Started: what runs hot from now on is worth optimizing (startup-tiering.ts), and the
  // young generation grows no further than the start grew it (young-generation.ts).
  resumeOptimizingCompiler();
  capYoungGeneration();

  return {
    config,
    log,
    docker,
    images,
    server,
    reconciled,
    async stop() {
      // GetContainerEvents streams last forever; end them so the server can drain.
      views.containerEvents.close();
      runtime.rootfsSweeper.stop();
      runtime.ociLayerReregistrar?.stop();
      await server.stop(config.shutdownGraceMs);
      await metrics.stop();
      await streaming.server.stop();
      await logFollowers.stopAll();
      await network.close();
      await docker.close();
    },
  };
}

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === "check") return await runCheck(argv.slice(1));
  // The OCI runtime layer's commands (src/oci/): loaded only when asked for.
  if (argv[0] === "oci-edit") return await (await import("./oci/edit-command.ts")).runOciEdit(argv.slice(1));
  if (argv[0] === "oci-layer") return await (await import("./oci/layer-command.ts")).runOciLayer(argv.slice(1));
  let parsed;
  try {
    parsed = parseConfig(argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`cridock: ${err.message}\nRun cridock --help for the flags.\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.kind === "help") {
    process.stdout.write(parsed.text + "\n");
    return 0;
  }
  if (parsed.kind === "version") {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  const { config } = parsed;
  const log = createLogger(config.logLevel);
  const signals = holdSignalsWhileStarting(log);
  let cridock: Cridock;
  try {
    cridock = await startCridock(config, log);
  } catch (err) {
    log.fatal({ err }, `cridock could not start: ${describeCause(err)}`);
    return 1;
  }
  return await serveUntilStopped(cridock, signals, log);
}

/** SIGTERM and SIGINT, caught from before the start until the process ends. */
interface ShutdownSignals {
  /** The signal that came while cridock started, if one did. */
  readonly duringStart: NodeJS.Signals | undefined;
  /** Hands every later signal to `handler` instead. */
  handle(handler: (signal: NodeJS.Signals) => void): void;
}

/**
 * The handlers go in before the socket is bound: a client may connect (and
 * a supervisor signal) as soon as it is. A signal during the start is kept
 * and acted on once cridock is up, so the shutdown is a graceful one; a
 * second one while it starts ends the process at once.
 */
function holdSignalsWhileStarting(log: Logger): ShutdownSignals {
  let startSignal: NodeJS.Signals | undefined;
  let onSignal = (signal: NodeJS.Signals) => {
    if (startSignal) process.exit(signal === "SIGINT" ? 130 : 143);
    startSignal = signal;
    log.info({ signal }, "signal while starting: shutting down once started");
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  return {
    get duringStart() {
      return startSignal;
    },
    handle(handler) {
      onSignal = handler;
    },
  };
}

/**
 * Serves until a signal (or a reconciliation that fails after serving
 * began) stops cridock; tells systemd it is ready, then that it stops. The
 * exit code: 0 after a clean stop, 1 after a failed one or a failed start.
 */
function serveUntilStopped(cridock: Cridock, signals: ShutdownSignals, log: Logger): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, "shutting down");
      void notifySystemd({ STOPPING: "1" }, log);
      cridock.stop().then(
        () => resolve(0),
        (err) => {
          log.error({ err }, "error during shutdown");
          resolve(1);
        },
      );
    };
    signals.handle(onSignal);
    if (signals.duringStart) return onSignal(signals.duringStart);
    // A reconciliation still running when serving began may fail later: that ends the process, as a failed start.
    cridock.reconciled.catch((err: unknown) => {
      if (stopping) return;
      stopping = true;
      log.fatal({ err }, `cridock could not start: ${describeCause(err)}`);
      cridock.stop().finally(() => resolve(1));
    });
    // Type=notify: systemd counts the service started once the socket serves.
    void notifySystemd({ READY: "1", STATUS: `serving CRI on ${cridock.config.listenSocket || "fd://"}` }, log);
  });
}

const isEntry = import.meta.url === `file://${process.argv[1]}` || (globalThis as { Deno?: { mainModule?: string } }).Deno?.mainModule === import.meta.url;
if (isEntry) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`cridock: fatal: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}
