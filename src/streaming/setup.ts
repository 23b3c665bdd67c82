/**
 * The streaming server a start builds: exec and attach through Docker,
 * port-forward into the pods' network namespaces, behind the HTTP server
 * kubelet's streaming URLs point at. Started by the caller (its own timed
 * step of the start).
 */
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { ExecService } from "../runtime/exec/manager.ts";
import { PortForwarder } from "../runtime/exec/port-forward.ts";
import type { SandboxLookup } from "../runtime/sandbox/view.ts";
import { StreamingServer } from "./server.ts";

/** The flags the server is built from. */
export interface StreamingSettings {
  streamingHost: string;
  streamingPort: number;
  streamingStallTimeoutMs: number;
}

export interface Streaming {
  exec: ExecService;
  portForwarder: PortForwarder;
  server: StreamingServer;
}

export function createStreaming(settings: StreamingSettings, log: Logger, docker: DockerClient, sandboxes: SandboxLookup): Streaming {
  const exec = new ExecService(docker, log);
  const portForwarder = new PortForwarder(sandboxes, log);
  const server = new StreamingServer({
    host: settings.streamingHost,
    port: settings.streamingPort,
    writeStallTimeoutMs: settings.streamingStallTimeoutMs,
    logger: log,
    commands: exec,
    portForwards: portForwarder,
  });
  return { exec, portForwarder, server };
}
