/**
 * runtime.v1.RuntimeService: the union of the per-area handler tables. Each
 * area (runtime info, sandboxes, containers, streaming, stats) keeps its RPCs
 * in its own module so no file grows past one job.
 */
import type { HandlerTable } from "./handlers.ts";
import { runtimeInfoRpcs, type RuntimeInfoDeps } from "./runtime-info-rpcs.ts";
import { sandboxRpcs, type SandboxRpcDeps } from "./sandbox-rpcs.ts";
import { statsRpcs, type StatsDeps } from "./stats-rpcs.ts";
import { streamingRpcs, type StreamingRpcDeps } from "./streaming-rpcs.ts";
import { containerRpcs, type ContainerRpcDeps } from "./container-rpcs.ts";
import { metricsRpcs, type MetricsRpcDeps } from "./metrics-rpcs.ts";
import { containerEventRpcs, type ContainerEventRpcDeps } from "./container-events-rpcs.ts";
import { podCheckpointRpcs, type PodCheckpointRpcDeps } from "./pod-checkpoint-rpcs.ts";

export type RuntimeServiceDeps = RuntimeInfoDeps &
  SandboxRpcDeps &
  StatsDeps &
  ContainerRpcDeps &
  StreamingRpcDeps &
  MetricsRpcDeps &
  ContainerEventRpcDeps &
  PodCheckpointRpcDeps;

export function runtimeServiceRpcs(deps: RuntimeServiceDeps): HandlerTable {
  return {
    ...runtimeInfoRpcs(deps),
    ...sandboxRpcs(deps),
    ...statsRpcs(deps),
    ...streamingRpcs(deps),
    ...containerRpcs(deps),
    ...metricsRpcs(deps),
    ...containerEventRpcs(deps),
    ...podCheckpointRpcs(deps),
  };
}
