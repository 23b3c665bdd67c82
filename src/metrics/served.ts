/**
 * Metrics when --metrics-bind-addr is given: the registry (prom-client), the
 * scrape server and the hooks setup.ts hands to the components. Loaded only
 * then (see setup.ts).
 */
import type { Logger } from "../log.ts";
import { logTotals } from "../logs/totals.ts";
import { rootfsSweepTotals } from "../oci/rootfs-sweeper.ts";
import { addStepSink } from "../steps.ts";
import { MetricsServer } from "./http.ts";
import { CridockMetrics } from "./registry.ts";
import { instrumentHandlers } from "./rpc.ts";
import type { MetricsWiring } from "./wiring.ts";

const LOOPBACK = /^(127\.|::1$|localhost$)/;

export function servedMetrics(bind: { host: string; port: number }, log: Logger): MetricsWiring {
  const metrics = new CridockMetrics();
  const server = new MetricsServer(metrics, { host: bind.host, port: bind.port, logger: log });
  const removeStepSink = addStepSink((operation, step, ms) => metrics.operationStep(operation, step, ms / 1000));
  return {
    dockerObserver: (method, path, seconds, outcome) => metrics.dockerRequest(method, path, seconds, outcome),
    onPull: (seconds, result) => metrics.imagePull(seconds, result),
    onCniOperation: (operation, seconds, ok) => metrics.cniOperation(operation, seconds, ok),
    handlers: (service, table) => instrumentHandlers(service, table, metrics),
    async start({ objectCounts, held, ociLayerReregistrations }) {
      metrics.setSources({ objectCounts, held, logTotals: () => logTotals, rootfsSweep: () => rootfsSweepTotals, ociLayerReregistrations });
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
