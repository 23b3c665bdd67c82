/**
 * Wires metrics into the components main() builds, in a few calls, so the
 * entry point stays a list of components: the Docker client's request hook,
 * the CNI operation hook, the image pull hook, the CRI handler wrapper, a sink
 * for the step timer's steps, and the scrape-time sources (object counts, log totals). Without
 * --metrics-bind-addr nothing is created and every hook is absent, and
 * prom-client and the scrape server are not even loaded (served.ts is
 * imported on demand): they cost an idle process about 3 MB of memory it
 * has no use for (test/unit/startup-modules.test.ts keeps them out).
 */
import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import type { ObjectCounts } from "./registry.ts";
import type { MetricsWiring } from "./wiring.ts";
export type { MetricsWiring } from "./wiring.ts";

const NO_METRICS: MetricsWiring = {
  handlers: (_s, t) => t,
  start: async () => {},
  stop: async () => {},
  address: () => undefined,
};

export async function metricsWiring(config: Config, log: Logger): Promise<MetricsWiring> {
  const bind = config.metrics;
  if (!bind) return NO_METRICS;
  const { servedMetrics } = await import("./served.ts");
  return servedMetrics(bind, log);
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
