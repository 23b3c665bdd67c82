/** What metrics give the components main() builds (see setup.ts), served or not. */
import type { HandlerTable } from "../cri/handlers.ts";
import type { DockerRequestObserver } from "../docker/observer.ts";
import type { CridockMetrics, HeldResources, ObjectCounts } from "./registry.ts";

export interface MetricsWiring {
  dockerObserver?: DockerRequestObserver;
  onPull?: CridockMetrics["imagePull"];
  onCniOperation?: CridockMetrics["cniOperation"];
  handlers(service: "RuntimeService" | "ImageService", table: HandlerTable): HandlerTable;
  /** Starts serving /metrics once the objects can be counted. */
  start(sources: ScrapeSources): Promise<void>;
  stop(): Promise<void>;
  /** The bound address, when serving. */
  address(): { host: string; port: number } | undefined;
}

/** What main() hands to the scrape once its components exist. */
export interface ScrapeSources {
  objectCounts: () => Promise<ObjectCounts>;
  held: () => HeldResources;
  /** Re-registrations of the OCI runtime layer by result; absent when they are off. */
  ociLayerReregistrations?: () => Record<string, number>;
}
