/**
 * The Docker client as cridock's runtime uses it, opened once at start:
 * kubelet relists every second, so container lists that filter on the type
 * label cridock puts on its containers (labels.ts) are answered from a
 * snapshot that Docker's event stream keeps current, and the stream is
 * watched from the start.
 */
import { DockerClient, type DockerClientOptions } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { TYPE_LABEL } from "./labels.ts";

/** The flags the client is opened with. */
export interface DockerClientSettings {
  dockerEndpoint: string;
  runtimeRequestTimeoutMs: number;
}

export function openDockerClient(settings: DockerClientSettings, log: Logger, onRequest?: DockerClientOptions["onRequest"]): DockerClient {
  const docker = new DockerClient({
    onRequest,
    endpoint: settings.dockerEndpoint,
    requestTimeoutMs: settings.runtimeRequestTimeoutMs,
    logger: log,
    // kubelet relists every second: answer from a snapshot kept current by Docker's events.
    listCacheScopeLabel: TYPE_LABEL,
  });
  docker.watchContainerEvents();
  return docker;
}
