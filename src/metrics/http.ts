/**
 * The scrape endpoint: GET /metrics on --metrics-bind-addr, plain HTTP.
 * Anything else is 404; a scrape that fails answers 500 with the reason and
 * never takes the runtime down.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../log.ts";
import { CridockError } from "../errors.ts";
import type { CridockMetrics } from "./registry.ts";

export class MetricsServer {
  private server: Server | undefined;
  private readonly log: Logger;

  constructor(
    private readonly metrics: CridockMetrics,
    private readonly options: { host: string; port: number; logger: Logger },
  ) {
    this.log = options.logger.child({ component: "metrics" });
  }

  /** The bound address (port resolved when 0 was asked for). */
  address(): { host: string; port: number } {
    const address = this.server?.address() as AddressInfo | null | undefined;
    return { host: this.options.host, port: address?.port ?? this.options.port };
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?", 1)[0];
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET, HEAD" }).end();
        return;
      }
      if (path !== "/metrics") {
        res.writeHead(404, { "content-type": "text/plain" }).end("cridock serves metrics at /metrics\n");
        return;
      }
      this.metrics.render().then(
        ({ contentType, body }) => res.writeHead(200, { "content-type": contentType }).end(req.method === "HEAD" ? undefined : body),
        (err: unknown) => {
          this.log.warn({ err }, "metrics scrape failed");
          res.writeHead(500, { "content-type": "text/plain" }).end(`scrape failed: ${(err as Error).message}\n`);
        },
      );
    });
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) =>
        reject(new CridockError("UNAVAILABLE", `cannot serve metrics on ${this.options.host}:${this.options.port}`, { cause: err })),
      );
      server.listen(this.options.port, this.options.host, () => resolve());
    });
    server.on("error", (err) => this.log.error({ err }, "metrics server error"));
    this.server = server;
    const { host, port } = this.address();
    this.log.info({ address: `${host.includes(":") ? `[${host}]` : host}:${port}` }, "serving metrics");
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections?.();
    });
  }
}
