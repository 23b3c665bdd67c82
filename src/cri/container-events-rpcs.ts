/**
 * GetContainerEvents (evented PLEG): a server stream of the domain's pod
 * container events (runtime/container-events.ts), encoded as kubelet reads
 * them. The stream lasts until the client cancels or cridock stops; a client
 * that falls behind is ended with RESOURCE_EXHAUSTED by the feed.
 */
import type { HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { ContainerEventType } from "./proto-types.ts";
import type { PodContainerEvent, PodEventFeed, PodEventType } from "../runtime/container-events.ts";
import { sandboxStatusToCri } from "./sandbox-rpcs.ts";
import { statusToCri } from "./container-rpcs.ts";

export interface ContainerEventRpcDeps {
  containerEvents: PodEventFeed;
}

const TYPES: Record<PodEventType, cri.ContainerEventType> = {
  created: ContainerEventType.CONTAINER_CREATED_EVENT,
  started: ContainerEventType.CONTAINER_STARTED_EVENT,
  stopped: ContainerEventType.CONTAINER_STOPPED_EVENT,
  deleted: ContainerEventType.CONTAINER_DELETED_EVENT,
};

export function containerEventToCri(e: PodContainerEvent): cri.ContainerEventResponse {
  return {
    containerId: e.containerId,
    containerEventType: TYPES[e.type],
    createdAt: e.createdAt,
    podSandboxStatus: sandboxStatusToCri(e.sandbox),
    containersStatuses: e.containers.map(statusToCri),
  };
}

export function containerEventRpcs({ containerEvents }: ContainerEventRpcDeps): HandlerTable {
  return {
    async GetContainerEvents(_request: cri.GetEventsRequest, ctx, send) {
      const subscription = containerEvents.subscribe();
      let onAbort!: () => void;
      // A client that stops reading leaves send() pending; its cancel still ends the call.
      const aborted = new Promise<void>((resolve) => (onAbort = () => (subscription.close(), resolve())));
      if (ctx.signal.aborted) onAbort();
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      try {
        for (;;) {
          const event = await subscription.next();
          if (!event || ctx.signal.aborted) return;
          await Promise.race([send(containerEventToCri(event)), aborted]);
        }
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        subscription.close();
      }
    },
  };
}
