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

export async function countDockerRequests(upstream = TEST_DOCKER_ENDPOINT): Promise<DockerRequestCounter> {
  const target = upstream.replace(/^unix:\/\//, "");
  const dir = await mkdtemp(join(tmpdir(), "cridock-docker-counter-"));
  const socketPath = join(dir, "docker.sock");
  const seen: DockerRequest[] = [];
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const daemon = connect(target);
    open.add(client).add(daemon);
    const frame = requestFramer((r) => seen.push(r));
    client.on("data", (chunk: Buffer) => {
      frame(chunk);
      daemon.write(chunk);
    });
    daemon.on("data", (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      daemon.destroy();
      open.delete(client);
      open.delete(daemon);
    };
    client.on("close", end).on("error", end);
    daemon.on("close", end).on("error", end);
  });
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
