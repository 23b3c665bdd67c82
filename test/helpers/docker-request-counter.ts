/**
 * A unix socket in front of a real dockerd that passes every byte through
 * unchanged and notes the request line of each HTTP request a client sends
 * (method and path, query cut off). Tests point cridock's --docker-endpoint
 * at it to assert how many Engine API round trips one CRI call costs.
 *
 * The requests are framed from the client's bytes as they pass: a head up
 * to its blank line, then a body of its Content-Length. A connection whose
 * request asks for an upgrade (exec start, attach: then it carries a
 * process's stdio) or sends a chunked body is not read further.
 * pipeToDocker, the pass-through alone, serves tests that hold or
 * release Docker connections themselves.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TEST_DOCKER_ENDPOINT } from "./env.ts";

export interface DockerRequest {
  method: string;
  /** The path without the API version prefix and query: `/containers/<id>/json`. */
  path: string;
}

export interface DockerRequestCounter {
  /** `unix://…`, for cridock's --docker-endpoint. */
  endpoint: string;
  /** Every request seen so far, in order. */
  requests(): DockerRequest[];
  close(): Promise<void>;
}

const REQUEST_LINE = /^([A-Z]+) (\/[^ ?]*)\S* HTTP\/1\.1$/;

/** Reads one connection's requests as its bytes arrive; calls `seen` for each. */
function requestFramer(seen: (r: DockerRequest) => void): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let bodyLeft = 0;
  let done = false;
  return (chunk) => {
    if (done) return;
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (bodyLeft > 0) {
        const skip = Math.min(bodyLeft, pending.length);
        pending = pending.subarray(skip);
        bodyLeft -= skip;
        if (bodyLeft > 0) return;
      }
      const end = pending.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [line = "", ...headers] = pending.subarray(0, end).toString("latin1").split("\r\n");
      pending = pending.subarray(end + 4);
      const m = REQUEST_LINE.exec(line);
      if (m) seen({ method: m[1]!, path: m[2]!.replace(/^\/v1\.\d+(?=\/)/, "") });
      const header = (name: string) => headers.find((h) => h.toLowerCase().startsWith(`${name}:`))?.slice(name.length + 1).trim();
      if (!m || header("upgrade") || header("transfer-encoding")) {
        done = true;
        return;
      }
      bodyLeft = Number(header("content-length") ?? 0);
    }
  };
}

export interface PipeOptions {
  /** Docker's endpoint, `unix://…`; the test engine's by default. */
  upstream?: string;
  /** Sees each chunk the client sends, before it is passed on. */
  onClientData?: (chunk: Buffer) => void;
  /** Both sockets, as they are made: a server's close must destroy them too. */
  track?: Set<Socket>;
  /**
   * Sees each chunk the client sends; a promise it returns holds that chunk
   * and everything after it on this connection until it resolves (a dockerd
   * slow to answer some requests).
   */
  holdFrom?: (chunk: Buffer) => Promise<void> | undefined;
}

/** Joins `client` to a new connection to dockerd, both ways; either end's close or error closes both. */
export function pipeToDocker(client: Socket, options: PipeOptions = {}): void {
  const daemon = connect((options.upstream ?? TEST_DOCKER_ENDPOINT).replace(/^unix:\/\//, ""));
  options.track?.add(client).add(daemon);
  let held: Buffer[] | undefined;
  client.on("data", (chunk: Buffer) => {
    options.onClientData?.(chunk);
    const hold = held ? undefined : options.holdFrom?.(chunk);
    if (hold) {
      const queue: Buffer[] = (held = []);
      void hold.then(() => {
        held = undefined;
        for (const c of queue) daemon.write(c);
      });
    }
    if (held) held.push(chunk);
    else daemon.write(chunk);
  });
  daemon.on("data", (chunk: Buffer) => client.write(chunk));
  const end = () => {
    client.destroy();
    daemon.destroy();
    options.track?.delete(client);
    options.track?.delete(daemon);
  };
  client.on("close", end).on("error", end);
  daemon.on("close", end).on("error", end);
}

export async function countDockerRequests(upstream = TEST_DOCKER_ENDPOINT): Promise<DockerRequestCounter> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-docker-counter-"));
  const socketPath = join(dir, "docker.sock");
  const seen: DockerRequest[] = [];
  const open = new Set<Socket>();
  const server = createServer((client) => pipeToDocker(client, { upstream, onClientData: requestFramer((r) => seen.push(r)), track: open }));
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(socketPath, resolve));
  return {
    endpoint: `unix://${socketPath}`,
    requests: () => [...seen],
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise((resolve) => server.close(resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
