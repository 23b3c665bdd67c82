/**
 * cridock entry point: flags → config → components → serve. SIGTERM/SIGINT
 * stop accepting calls, let in-flight ones finish (bounded), remove the
 * socket and exit 0.
 */
// First: V8's optimizing compiler stays off while the other modules load and cridock starts.
import { resumeOptimizingCompiler } from "./startup-tiering.ts";
import { capYoungGeneration } from "./young-generation.ts";
import process from "node:process";
import { ConfigError, parseConfig, type Config } from "./config.ts";
import { createLogger, type Logger } from "./log.ts";
import { DockerClient } from "./docker/client.ts";
import { CriServer, prepareSocketPath } from "./cri/server.ts";
import { runtimeServiceRpcs } from "./cri/runtime-service.ts";
import { configInfo } from "./cri/runtime-info-rpcs.ts";
import { imageServiceRpcs } from "./cri/image-service.ts";
import { RuntimeStatus } from "./runtime/status.ts";
import { ImageFilesystem } from "./runtime/image/imagefs.ts";
import { ImageManager } from "./runtime/image/manager.ts";
import { DockerBridgeNetwork, type PodNetwork } from "./network/plugin.ts";
import { CniNetwork, type CniNetworkOptions } from "./network/cni.ts";
import { PodCidrStore } from "./store/pod-cidr.ts";
import { CheckpointStore } from "./store/checkpoint.ts";
import { SandboxManager } from "./runtime/sandbox/manager.ts";
import type { SandboxRecord } from "./runtime/sandbox/record.ts";
import { recoverSandboxes } from "./runtime/sandbox/recovery.ts";
import { bootedSince, BootStore, currentBootId } from "./store/boot.ts";
import { adoptCriDockerdSandboxes } from "./runtime/sandbox/adopt.ts";
import { join } from "node:path";
import { StatsService } from "./runtime/stats.ts";
import { StatsCollector } from "./stats/collector.ts";
import { PodMetricsService } from "./runtime/pod-metrics.ts";
import { TYPE_LABEL } from "./runtime/labels.ts";
import { describeCause } from "./errors.ts";
import { ExecService } from "./runtime/exec/manager.ts";
import { PortForwarder } from "./runtime/exec/port-forward.ts";
import { StreamingServer } from "./streaming/server.ts";
import { DockerImageFiles } from "./runtime/image-files.ts";
import { ContainerManager } from "./runtime/container/manager.ts";
import { LogFollowers } from "./logs/followers.ts";
import { countObjects, metricsWiring } from "./metrics/setup.ts";
import { notifySystemd } from "./systemd/notify.ts";
import { runCheck } from "./check/command.ts";
import { CRIDOCK_VERSION } from "./version.ts";
import { PodEventFeed } from "./runtime/container-events.ts";
import type { ContainerInfo } from "./runtime/container/spec.ts";
import { OciLayerLookup } from "./oci/layer.ts";
import { LayerReregistrar } from "./oci/layer-reregister.ts";
import { RECORD_NAME } from "./oci/registration-record.ts";
import { selfCommand } from "./self-command.ts";
import { UsernsSupportProbe } from "./oci/userns-support.ts";
import { sweepRootfs } from "./oci/idmapped-rootfs.ts";
import { isNotFound } from "./docker/errors.ts";
import { SpecEditsStore } from "./oci/edits-store.ts";
import { StepTimer } from "./steps.ts";
import { StartupGate } from "./cri/startup-gate.ts";
import { decideOomScorePolicy, readOomScoreFacts, type OomScorePolicy } from "./runtime/container/oom-score.ts";

/** Spec edits older than this were left by a start that never returned. */
const STALE_EDITS_MS = 3_600_000;

/**
 * How long a start waits for its reconciliation with dockerd before serving
 * anyway. A few seconds: clients' connections queue in the socket's backlog
 * meanwhile, and systemd's start timeout must never be what ends the wait.
 */
const SERVE_BEFORE_RECONCILED_MS = 5_000;

/** The start's budget after its module load (see startCridock); the reconciliation's share of it is bounded by the above. */
const START_BUDGET_AFTER_LOAD_MS = 120_000;

/** Whether `promise` fulfils within `ms`; its rejection within `ms` is thrown. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

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
  const docker = new DockerClient({
    onRequest: metrics.dockerObserver,
    endpoint: config.dockerEndpoint,
    requestTimeoutMs: config.runtimeRequestTimeoutMs,
    logger: log,
    // kubelet relists every second: answer from a snapshot kept current by Docker's events.
    listCacheScopeLabel: TYPE_LABEL,
  });
  docker.watchContainerEvents();
  const podCidrs = new PodCidrStore(config.rootDirectory);
  const network: PodNetwork = await startup.time("network", async () => startPodNetwork(config, log, await podCidrs.load(), metrics.onCniOperation));
  const oomScore = await oomScorePolicy(config, log);
  // A tool that owns daemon.json (minikube) may rewrite it without the layer and restart dockerd:
  // the server registers it again as install did, where install recorded it (oci/layer-reregister.ts).
  const reregistrar = config.ociLayerReregister
    ? new LayerReregistrar({
        recordPath: join(config.rootDirectory, RECORD_NAME),
        info: () => docker.info(),
        cridock: selfCommand(),
        log: log.child({ component: "oci-layer" }),
        onRegistered: () => ociLayer.forget(),
      })
    : undefined;
  // What Docker's API cannot carry goes into the OCI spec through cridock's runtime layer, where dockerd has it.
  const ociLayer = new OciLayerLookup(
    () => docker.info(),
    (reason) => log.warn({ reason }, "no OCI runtime layer: cgroup v2 unified settings are written after each container starts, not before its first instruction"),
    reregistrar && ((reason) => void reregistrar.layerNotReady(reason)),
  );
  // A dockerd that came back (restarted) may have read a daemon.json without the layer: ask it at once, not when the cache expires.
  docker.events.onConnection((connected) => {
    if (!connected) return;
    ociLayer.forget();
    void ociLayer.current({ quiet: true }).catch(() => undefined);
  });
  const userns = new UsernsSupportProbe(
    () => ociLayer.current({ quiet: true }),
    async () => ({ ...(await docker.info()), apiVersion: await docker.apiVersion() }),
  );
  const status = new RuntimeStatus(docker, network, (cidr) => podCidrs.save(cidr), () => userns.current());
  status.prefetchOnConnect();
  const imageFs = new ImageFilesystem(docker);
  const images = new ImageManager({
    docker,
    log,
    pauseImage: config.podInfraContainerImage,
    pullProgressDeadlineMs: config.imagePullProgressDeadlineMs,
    onPull: metrics.onPull,
  });

  const logFollowers = new LogFollowers(docker, config.rootDirectory, log);
  const sandboxStore = new CheckpointStore<SandboxRecord>(join(config.rootDirectory, "sandbox"));
  const imageFiles = new DockerImageFiles(docker, log);
  const sandboxes = new SandboxManager({
    docker,
    network,
    store: sandboxStore,
    log,
    pauseImage: config.podInfraContainerImage,
    ensureImage: (ref, signal) => images.ensureImage(ref, { signal }),
    files: imageFiles,
    rootDirectory: config.rootDirectory,
    logMaxSize: config.dockerLogMaxSize,
    logMaxFile: config.dockerLogMaxFile,
    oomScore,
    cgroupDriver: () => status.cgroupDriver(),
    runtimeNames: async () => Object.keys((await docker.info()).Runtimes ?? {}),
    containerRemoved: (id) => logFollowers.forget(id),
    userns: () => userns.current(),
  });
  // What a start or a delete left when cridock, dockerd or containerd stopped in its middle:
  // spec edits (src/oci/edits-store.ts) and idmapped rootfs (src/oci/idmapped-rootfs.ts).
  void ociLayer.current({ quiet: true }).then(async (layer) => {
    if (!layer) return;
    await new SpecEditsStore(layer.editsDir)
      .sweep(STALE_EDITS_MS)
      .then((removed) => removed.length > 0 && log.info({ removed }, "removed stale OCI spec edits"))
      .catch((err: unknown) => log.warn({ err }, "could not sweep stale OCI spec edits"));
    if (!layer.rootfsDir) return;
    // Only a container Docker says is gone or stopped: a dockerd that does not answer may still run it (live-restore).
    const running = (id: string) => docker.inspectContainer(id).then((c) => c.State.Running, (err: unknown) => !isNotFound(err));
    await sweepRootfs(layer.rootfsDir, STALE_EDITS_MS, running)
      .then((released) => released.length > 0 && log.info({ released }, "released the idmapped rootfs of containers that no longer run"))
      .catch((err: unknown) => log.warn({ err }, "could not sweep idmapped rootfs left by stopped containers"));
  }, (err: unknown) => log.warn({ err }, "could not ask dockerd for the OCI runtime layer to sweep what it left"));
  const containers = new ContainerManager({
    docker,
    sandboxes,
    images,
    files: imageFiles,
    logs: logFollowers,
    log,
    logMaxSize: config.dockerLogMaxSize,
    logMaxFile: config.dockerLogMaxFile,
    oomScore,
    rootDirectory: config.rootDirectory,
    cgroupDriver: () => status.cgroupDriver(),
    requestTimeoutMs: config.runtimeRequestTimeoutMs,
    ociLayer: () => ociLayer.current(),
    userns: () => userns.current(),
  });
  // What the last run left, reconciled with Docker before pods are served (cri/startup-gate.ts).
  const gate = new StartupGate("scratch.sweep");
  // Each step is timed for the start's log and named for Status while the gate is closed.
  const reconcileStep = <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    gate.step(name);
    return startup.time(name, fn);
  };
  const reconciled = (async () => {
    // Scratch containers (image-files.ts) live for one create call; a crash may have left one.
    await reconcileStep("scratch.sweep", () => imageFiles.removeLeftovers())
      .then((n) => n > 0 && log.info({ removed: n }, "removed scratch containers left by an earlier run"))
      .catch((err) => log.warn({ err }, "could not remove leftover scratch containers"));
    const boots = new BootStore(config.rootDirectory);
    const [recordedBootId, bootId] = await Promise.all([boots.load(), currentBootId()]);
    const rebooted = bootedSince(recordedBootId, bootId);
    await reconcileStep("recovery", () => recoverSandboxes({ docker, store: sandboxStore, sandboxes, rootDirectory: config.rootDirectory, log, rebooted }));
    // Only once recovery is through: a start that fails before this stops the old boot's sandboxes again.
    // Written when the boot changed only: the same boot's restarts need no fsynced write.
    if (bootId && bootId !== recordedBootId) await boots.save(bootId).catch((err) => log.warn({ err }, "could not record this boot's id; the next start cannot tell whether the machine rebooted"));
    // Log writers of containers that ran on while cridock was down pick up where they stopped.
    await reconcileStep("logs.resume", () => containers.resumeLogs()).catch((err) => log.error({ err }, "could not resume container log writers"));
    // Pods cri-dockerd left running become cridock's (checkpoint, netns handle, IPs, CRI logs).
    await reconcileStep("adopt", () =>
      adoptCriDockerdSandboxes({ docker, sandboxes, network, logs: logFollowers, criDockerdRoot: config.criDockerdRootDirectory, log }),
    );
  })();
  // Handled where it is awaited below; until then a failure must not count as unhandled.
  reconciled.catch(() => undefined);

  const containerStatuses = async (sandboxId: string): Promise<ContainerInfo[]> => {
    const listed = await containers.list({ id: "", sandboxId, labelSelector: {} });
    const statuses = await Promise.all(listed.map((c) => containers.status(c.id).catch(() => undefined)));
    return statuses.filter((s): s is ContainerInfo => s !== undefined);
  };
  const containerEvents = new PodEventFeed({
    events: docker.events,
    sandboxStatus: (id) => sandboxes.status(id),
    containerStatuses,
    log,
  });
  const sandboxContainers = { wanted: () => containerEvents.subscriberCount > 0, statuses: containerStatuses };

  const stats = new StatsService(docker, new StatsCollector(), log.child({ component: "stats" }));
  const podMetrics = new PodMetricsService(stats, docker, log.child({ component: "pod-metrics" }));

  const exec = new ExecService(docker, log);
  const portForwarder = new PortForwarder(sandboxes, log);
  const streaming = new StreamingServer({
    host: config.streamingHost,
    port: config.streamingPort,
    writeStallTimeoutMs: config.streamingStallTimeoutMs,
    logger: log,
    commands: exec,
    portForwards: portForwarder,
  });
  await startup.time("streaming", () => streaming.start());

  const server = new CriServer({
    socketPath: config.listenSocket,
    socketActivated: config.socketActivated,
    logger: log,
    runtimeHandlers: metrics.handlers(
      "RuntimeService",
      gate.guard(runtimeServiceRpcs({
        status,
        sandboxes,
        sandboxContainers,
        stats,
        podMetrics,
        containers,
        containerEvents,
        exec,
        portForwarder,
        streaming,
        verboseInfo: () => ({ config: configInfo(config) }),
        starting: () => gate.notReady(),
      })),
    ),
    imageHandlers: metrics.handlers("ImageService", imageServiceRpcs({ imageFs, images, containerFilesystems: () => stats.writableLayers() })),
  });
  await metrics.start({
    objectCounts: () => countObjects(() => sandboxes.list(), () => containers.list({ id: "", sandboxId: "", labelSelector: {} })),
    held: () => ({ logFollowers: logFollowers.counts(), dockerConnections: docker.connectionCounts() }),
    ociLayerReregistrations: reregistrar && (() => reregistrar.counts()),
  });
  // Normally the reconciliation is long done by now. A dockerd that has not answered it
  // within SERVE_BEFORE_RECONCILED_MS does not hold the socket: Status says why the
  // runtime is not ready, and pod calls wait for the gate (systemd's start timeout
  // killed a start that waited for a starved dockerd, and the next start waited again).
  const reconciledInTime = await settlesWithin(reconciled, SERVE_BEFORE_RECONCILED_MS);
  if (reconciledInTime) gate.open();
  await startup.time("serve", () => server.start());
  if (reconciledInTime) {
    startup.finish(log, {}, "info");
  } else {
    log.warn({ step: gate.notReady()?.message, waitedMs: SERVE_BEFORE_RECONCILED_MS }, "serving before the start's reconciliation with dockerd is done: pod calls wait for it, Status reports the runtime not ready");
    reconciled.then(
      () => {
        gate.open();
        startup.finish(log, {}, "info");
      },
      (err: unknown) => gate.fail(err),
    );
  }
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
      containerEvents.close();
      reregistrar?.stop();
      await server.stop(config.shutdownGraceMs);
      await metrics.stop();
      await streaming.stop();
      await logFollowers.stopAll();
      await network.close();
      await docker.close();
    },
  };
}

/**
 * Whether container scores are clamped to cridock's own (oom-score.ts),
 * logged once: a clamped Guaranteed or node-critical pod is no better
 * protected from the OOM killer than cridock itself.
 */
async function oomScorePolicy(config: Config, log: Logger): Promise<OomScorePolicy> {
  let policy: OomScorePolicy;
  try {
    policy = decideOomScorePolicy(config.restrictOomScoreAdj, await readOomScoreFacts());
  } catch (err) {
    // Without /proc nothing can be decided: honour a forced setting, else pass scores on as asked.
    const restricted = config.restrictOomScoreAdj === true;
    policy = { restricted, floor: 0, hostRestricted: false, reason: `cannot read this process's /proc files: ${describeCause(err)}` };
  }
  if (policy.restricted) {
    log.warn(
      { floor: policy.floor, reason: policy.reason },
      `oom_score_adj is restricted: containers and sandboxes asking for less than ${policy.floor} get ${policy.floor} (${policy.reason})`,
    );
  } else if (policy.hostRestricted) {
    log.warn({ reason: policy.reason }, "oom_score_adj restriction forced off on a host that cannot lower scores");
  } else {
    log.debug({ reason: policy.reason }, "oom_score_adj is passed on as asked");
  }
  return policy;
}

/** --network-plugin=cni: CNI plugins from the conf dir; no-op: Docker's default bridge. */
async function startPodNetwork(
  config: Config,
  log: Logger,
  savedPodCidr: string | undefined,
  onOperation?: CniNetworkOptions["onOperation"],
): Promise<PodNetwork> {
  // kubelet's CIDR from before a restart is newer than --pod-cidr, which stands in only until kubelet sends one.
  const podCidr = savedPodCidr ?? config.podCidr;
  if (savedPodCidr) log.info({ podCidr: savedPodCidr }, "pod CIDR kubelet sent before this start");
  if (config.networkPlugin !== "cni") {
    const network = new DockerBridgeNetwork();
    if (podCidr) network.setPodCidr(podCidr);
    return network;
  }
  const network = new CniNetwork({
    confDir: config.cniConfDir,
    binDirs: config.cniBinDirs,
    cacheDir: config.cniCacheDir,
    podCidr,
    log,
    onOperation,
  });
  await network.start();
  return network;
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
    process.stdout.write(`cridock ${CRIDOCK_VERSION}\n`);
    return 0;
  }
  const { config } = parsed;
  const log = createLogger(config.logLevel);
  // The handlers go in before the socket is bound: a client may connect (and
  // a supervisor signal) as soon as it is. A signal during the start is kept
  // and acted on once cridock is up, so the shutdown is a graceful one; a
  // second one while it starts ends the process at once.
  let startSignal: NodeJS.Signals | undefined;
  let onSignal = (signal: NodeJS.Signals) => {
    if (startSignal) process.exit(signal === "SIGINT" ? 130 : 143);
    startSignal = signal;
    log.info({ signal }, "signal while starting: shutting down once started");
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  let cridock: Cridock;
  try {
    cridock = await startCridock(config, log);
  } catch (err) {
    log.fatal({ err }, `cridock could not start: ${describeCause(err)}`);
    return 1;
  }
  return await new Promise<number>((resolve) => {
    let stopping = false;
    onSignal = (signal) => {
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
    if (startSignal) return onSignal(startSignal);
    // A reconciliation still running when serving began may fail later: that ends the process, as a failed start.
    cridock.reconciled.catch((err: unknown) => {
      if (stopping) return;
      stopping = true;
      log.fatal({ err }, `cridock could not start: ${describeCause(err)}`);
      cridock.stop().finally(() => resolve(1));
    });
    // Type=notify: systemd counts the service started once the socket serves.
    void notifySystemd({ READY: "1", STATUS: `serving CRI on ${config.listenSocket || "fd://"}` }, log);
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
