/**
 * The CRI gRPC server a start builds over the runtime domain, and how it
 * begins serving: RuntimeService behind the start-up gate (pod calls wait
 * for the reconciliation with Docker; Version and Status answer at once),
 * ImageService beside it, both through the caller's handler wrapper (the
 * metrics' call counters when they are served).
 */
import type { Logger } from "../log.ts";
import type { RuntimeDomain, PodViews } from "../runtime/domain.ts";
import type { StepTimer } from "../steps.ts";
import type { Streaming } from "../streaming/setup.ts";
import type { HandlerTable } from "./handlers.ts";
import { imageServiceRpcs } from "./image-service.ts";
import { configInfo } from "./runtime-info-rpcs.ts";
import { runtimeServiceRpcs } from "./runtime-service.ts";
import { CriServer } from "./server.ts";
import type { StartupGate } from "./startup-gate.ts";

/**
 * How long a start waits for its reconciliation with dockerd before serving
 * anyway. A few seconds: clients' connections queue in the socket's backlog
 * meanwhile, and systemd's start timeout must never be what ends the wait.
 */
const SERVE_BEFORE_RECONCILED_MS = 5_000;

/** The flags the server reads; Status(verbose) reports all of them. */
export interface CriServerSettings {
  listenSocket: string;
  socketActivated: boolean;
  podInfraContainerImage: string;
}

/** Wraps a service's handler table (metrics/'s call counters, or nothing). */
export type HandlerWrapper = (service: "RuntimeService" | "ImageService", table: HandlerTable) => HandlerTable;

export interface CriServerParts {
  runtime: RuntimeDomain;
  views: PodViews;
  streaming: Streaming;
  gate: StartupGate;
  wrap: HandlerWrapper;
}

export function createCriServer<C extends CriServerSettings>(config: C, log: Logger, { runtime, views, streaming, gate, wrap }: CriServerParts): CriServer {
  const { status, sandboxes, containers, imageFs, images, podCheckpoints } = runtime;
  const { sandboxContainers, stats, podMetrics, containerEvents } = views;
  return new CriServer({
    socketPath: config.listenSocket,
    socketActivated: config.socketActivated,
    logger: log,
    runtimeHandlers: wrap(
      "RuntimeService",
      gate.guard(runtimeServiceRpcs({
        status,
        sandboxes,
        sandboxContainers,
        stats,
        podMetrics,
        containers,
        podCheckpoints,
        containerEvents,
        exec: streaming.exec,
        portForwarder: streaming.portForwarder,
        streaming: streaming.server,
        verboseInfo: () => ({ config: configInfo(config) }),
        starting: () => gate.notReady(),
      })),
    ),
    imageHandlers: wrap("ImageService", imageServiceRpcs({ imageFs, images, containerFilesystems: () => stats.writableLayers() })),
  });
}

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

/**
 * Serves the socket once the reconciliation is through, or after
 * SERVE_BEFORE_RECONCILED_MS with the gate still closed; logs the start's
 * steps once the reconciliation is through. A reconciliation that fails
 * within the wait is thrown (a failed start); one that fails later fails the
 * gate, and the caller ends the process.
 */
export async function serveOnceReconciled(server: CriServer, gate: StartupGate, reconciled: Promise<void>, startup: StepTimer, log: Logger): Promise<void> {
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
}
