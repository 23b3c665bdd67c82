/**
 * Wires metrics into the components main() builds, in a few calls, so the
 * entry point stays a list of components: the Docker client's request hook,
 * the CNI operation hook, the image pull hook, the CRI handler wrapper, a sink
 * for the step timer's steps, and the scrape-time sources (object counts, log totals). Without
 * --metrics-bind-addr nothing is created and every hook is absent.
 */
import type { Config } from "../config.ts";
import type { HandlerTable } from "../cri/handlers.ts";
import type { DockerRequestObserver } from "../docker/observer.ts";
import type { Logger } from "../log.ts";
import { logTotals } from "../logs/totals.ts";
import { addStepSink } from "../steps.ts";
import { MetricsServer } from "./http.ts";
import { CridockMetrics, type ObjectCounts } from "./registry.ts";
import { instrumentHandlers } from "./rpc.ts";

export interface MetricsWiring {
  dockerObserver?: DockerRequestObserver;
  onPull?: CridockMetrics["imagePull"];
  onCniOperation?: CridockMetrics["cniOperation"];
  handlers(service: "RuntimeService" | "ImageService", table: HandlerTable): HandlerTable;
  /** Starts serving /metrics once the objects can be counted. */
  start(objectCounts: () => Promise<ObjectCounts>): Promise<void>;
  stop(): Promise<void>;
  /** The bound address, when serving. */
  address(): { host: string; port: number } | undefined;
}

const LOOPBACK = /^(127\.|::1$|localhost$)/;

export function metricsWiring(config: Config, log: Logger): MetricsWiring {
  const bind = config.metrics;
  if (!bind) {
    return {
      handlers: (_s, t) => t,
      start: async () => {},
      stop: async () => {},
      address: () => undefined,
    };
  }
  const metrics = new CridockMetrics();
  const server = new MetricsServer(metrics, { host: bind.host, port: bind.port, logger: log });
  const removeStepSink = addStepSink((operation, step, ms) => metrics.operationStep(operation, step, ms / 1000));
  return {
    dockerObserver: (method, path, seconds, outcome) => metrics.dockerRequest(method, path, seconds, outcome),
    onPull: (seconds, result) => metrics.imagePull(seconds, result),
    onCniOperation: (operation, seconds, ok) => metrics.cniOperation(operation, seconds, ok),
    handlers: (service, table) => instrumentHandlers(service, table, metrics),
    async start(objectCounts) {
      metrics.setSources({ objectCounts, logTotals: () => logTotals });
      if (!LOOPBACK.test(bind.host)) {
        log.warn({ host: bind.host }, "metrics are served on a non-loopback address without authentication; firewall it or bind 127.0.0.1");
      }
      await server.start();
    },
    stop: async () => {
      removeStepSink();
      await server.stop();
    },
    address: () => server.address(),
  };
}

/** Sandboxes and containers by CRI state, from the runtime's own lists (answered from the list cache). */
export async function countObjects(
  sandboxes: () => Promise<{ ready: boolean }[]>,
  containers: () => Promise<{ state: string }[]>,
): Promise<ObjectCounts> {
  const [s, c] = await Promise.all([sandboxes(), containers()]);
  const counts: ObjectCounts = {
    sandboxes: { SANDBOX_READY: 0, SANDBOX_NOTREADY: 0 },
    containers: { CONTAINER_CREATED: 0, CONTAINER_RUNNING: 0, CONTAINER_EXITED: 0, CONTAINER_UNKNOWN: 0 },
  };
  for (const sandbox of s) counts.sandboxes[sandbox.ready ? "SANDBOX_READY" : "SANDBOX_NOTREADY"]!++;
  for (const container of c) {
    const state = `CONTAINER_${container.state.toUpperCase()}`;
    counts.containers[state] = (counts.containers[state] ?? 0) + 1;
  }
  return counts;
}
