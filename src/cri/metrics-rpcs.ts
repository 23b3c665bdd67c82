/**
 * ListMetricDescriptors, ListPodSandboxMetrics and StreamPodSandboxMetrics:
 * the cAdvisor-named series of runtime/cadvisor-metrics.ts as CRI messages, which
 * kubelet serves on /metrics/cadvisor under PodAndContainerStatsFromCRI.
 */
import type { HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { MetricType } from "./proto-types.ts";
import { sendInBatches } from "./list-stream.ts";
import { metricDescriptors, type MetricData } from "../runtime/cadvisor-metrics.ts";
import type { PodMetricsData, PodMetricsService } from "../runtime/pod-metrics.ts";

export interface MetricsRpcDeps {
  podMetrics: PodMetricsService;
}

function toMetric(m: MetricData): cri.Metric {
  return {
    name: m.name,
    timestamp: m.timestamp,
    metricType: m.kind === "counter" ? MetricType.COUNTER : MetricType.GAUGE,
    labelValues: m.labelValues,
    value: { value: m.value },
  };
}

export function toPodSandboxMetrics(p: PodMetricsData): cri.PodSandboxMetrics {
  return {
    podSandboxId: p.podSandboxId,
    metrics: p.metrics.map(toMetric),
    containerMetrics: p.containerMetrics.map((c) => ({ containerId: c.containerId, metrics: c.metrics.map(toMetric) })),
  };
}

export function metricsRpcs({ podMetrics }: MetricsRpcDeps): HandlerTable {
  const descriptors = metricDescriptors();
  return {
    async ListMetricDescriptors(): Promise<cri.ListMetricDescriptorsResponse> {
      return { descriptors };
    },

    async ListPodSandboxMetrics(): Promise<cri.ListPodSandboxMetricsResponse> {
      return { podMetrics: (await podMetrics.list()).map(toPodSandboxMetrics) };
    },

    async StreamPodSandboxMetrics(_request: cri.StreamPodSandboxMetricsRequest, _ctx, send) {
      const all = (await podMetrics.list()).map(toPodSandboxMetrics);
      await sendInBatches(all, (podSandboxMetrics) => send({ podSandboxMetrics }));
    },
  };
}
