/**
 * The CRI streaming server: the HTTP endpoint behind the URLs Exec, Attach
 * and PortForward return (`/exec/<token>`, `/attach/<token>`,
 * `/portforward/<token>`). A request redeems its token (single use) and
 * upgrades to SPDY/3.1 (`X-Stream-Protocol-Version` negotiation) or to
 * WebSocket (subprotocol negotiation); anything else is refused with a
 * plain HTTP status. Every live session is tracked so stop() ends them all.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { WebSocket, WebSocketServer } from "ws";
import { CridockError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { PORTFORWARD_PROTOCOL, SpdyPortForward, type PortForwardRequest, type PortForwardRuntime } from "./portforward.ts";
import {
  PROTOCOL_V1,
  SPDY_PROTOCOLS,
  SpdyRemoteCommand,
  WEBSOCKET_PROTOCOLS,
  protocolVersion,
  type RemoteCommandRequest,
  type RemoteCommandRuntime,
} from "./remotecommand.ts";
import { limitPendingConnections } from "./pending.ts";
import { SpdySession } from "./spdy.ts";
import { TokenStore } from "./tokens.ts";
import { serveWebSocketRemoteCommand } from "./websocket.ts";

export type StreamRequest = RemoteCommandRequest | PortForwardRequest;
type Kind = StreamRequest["kind"];

/** Port-forward over WebSocket tunnels the SPDY session (client-go's SPDYOverWebsocket dialer). */
export const WEBSOCKET_PORTFORWARD_PROTOCOL = `SPDY/3.1+${PORTFORWARD_PROTOCOL}`;

export interface StreamingServerOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  logger: Logger;
  commands: RemoteCommandRuntime;
  portForwards: PortForwardRuntime;
  tokenTtlMs?: number;
  /** How long a client has to open all the streams of a session (kubelet's default: 30 s). */
  streamCreationTimeoutMs?: number;
  /** Drop a client that reads none of our output for this long. */
  writeStallTimeoutMs?: number;
  /** Largest HTTP request head accepted (larger gets 431). */
  maxHeaderBytes?: number;
  /** How long a connection has to send its whole request head (see pending.ts). */
  headerTimeoutMs?: number;
  /** Connections at most waiting for their request head at once. */
  maxPendingConnections?: number;
}

const ROUTE = /^\/(exec|attach|portforward)\/([^/?#]+)$/;

export class StreamingServer {
  private readonly http: Server;
  /**
   * Made on the first WebSocket upgrade: kubelet speaks SPDY unless asked
   * otherwise, and `ws` costs an idle process memory for nothing until then.
   */
  private wss: Promise<{ server: WebSocketServer; ws: typeof import("ws") }> | undefined;
  private readonly tokens: TokenStore<StreamRequest>;
  private readonly log: Logger;
  /** Live sessions: close() ends one; `done` settles when its command or forwards have wound down. */
  private readonly live = new Set<{ close(): void; done: Promise<void> }>();
  private address: { host: string; port: number } | undefined;

  constructor(private readonly options: StreamingServerOptions) {
    this.log = options.logger.child({ component: "streaming" });
    this.tokens = new TokenStore({ ttlMs: options.tokenTtlMs });
    const headerTimeoutMs = options.headerTimeoutMs ?? 10_000;
    this.http = createServer(
      { maxHeaderSize: options.maxHeaderBytes ?? 16 * 1024, headersTimeout: headerTimeoutMs, requestTimeout: headerTimeoutMs, keepAliveTimeout: headerTimeoutMs },
      (req, res) => this.onPlainRequest(req, res),
    );
    limitPendingConnections(this.http, { headerTimeoutMs, maxPending: options.maxPendingConnections ?? 128, log: this.log });
    this.http.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    this.http.on("clientError", (err: Error & { code?: string }, socket: Duplex) => {
      const status = err.code === "HPE_HEADER_OVERFLOW" ? "431 Request Header Fields Too Large" : "400 Bad Request";
      if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
      socket.destroy();
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.http.once("error", (err) => reject(new CridockError("UNAVAILABLE", `cannot listen for streaming on ${this.options.host}:${this.options.port}`, { cause: err })));
      this.http.listen(this.options.port, this.options.host, () => resolve());
    });
    const bound = this.http.address();
    const port = typeof bound === "object" && bound ? bound.port : this.options.port;
    this.address = { host: this.options.host, port };
    this.log.info({ url: this.baseUrl }, "serving exec, attach and port-forward streams");
  }

  async stop(): Promise<void> {
    const sessions = [...this.live];
    this.live.clear();
    for (const session of sessions) session.close();
    // Give commands of vanished clients time to be killed, so none outlives cridock.
    const timer = new Promise<void>((resolve) => setTimeout(resolve, 10_000).unref());
    await Promise.race([Promise.all(sessions.map((s) => s.done.catch(() => undefined))), timer]);
    if (this.wss) for (const client of (await this.wss).server.clients) client.terminate();
    await new Promise<void>((resolve) => {
      this.http.close(() => resolve());
      this.http.closeAllConnections();
    });
  }

  private webSockets(): Promise<{ server: WebSocketServer; ws: typeof import("ws") }> {
    this.wss ??= import("ws").then((ws) => {
      const server = new ws.WebSocketServer({
        noServer: true,
        maxPayload: 16 * 1024 * 1024,
        perMessageDeflate: false,
        handleProtocols: (offered: Set<string>, req: IncomingMessage) => {
          const supported = (req as IncomingMessage & { cridockKind?: Kind }).cridockKind === "portforward" ? [WEBSOCKET_PORTFORWARD_PROTOCOL] : WEBSOCKET_PROTOCOLS;
          return supported.find((p) => offered.has(p)) ?? false;
        },
      });
      server.on("headers", (headers: string[], req: IncomingMessage) => {
        const protocol = (req as IncomingMessage & { cridockProtocol?: string }).cridockProtocol;
        if (protocol) headers.push(`Sec-WebSocket-Protocol: ${protocol}`);
      });
      return { server, ws };
    });
    return this.wss;
  }

  /** http://host:port, with a connectable host when bound to a wildcard address. */
  get baseUrl(): string {
    if (!this.address) throw new Error("the streaming server is not started");
    let host = this.address.host;
    if (host === "0.0.0.0" || host === "") host = "127.0.0.1";
    if (host === "::") host = "::1";
    return `http://${host.includes(":") ? `[${host}]` : host}:${this.address.port}`;
  }

  /** Registers a request and returns the absolute URL that redeems it. */
  urlFor(request: StreamRequest): string {
    return `${this.baseUrl}/${request.kind}/${this.tokens.issue(request)}`;
  }

  get liveSessions(): number {
    return this.live.size;
  }

  private onPlainRequest(req: IncomingMessage, res: ServerResponse): void {
    const route = ROUTE.exec(new URL(req.url ?? "/", "http://x").pathname);
    res.statusCode = route ? 400 : 404;
    res.setHeader("content-type", "text/plain");
    res.end(route ? "this endpoint needs an Upgrade to SPDY/3.1 or websocket\n" : "not found\n");
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => undefined);
    const route = ROUTE.exec(new URL(req.url ?? "/", "http://x").pathname);
    const request = route ? this.tokens.redeem(route[2]!) : undefined;
    if (!route || !request || request.kind !== route[1]) {
      this.log.info({ path: route ? `/${route[1]}/<token>` : "(other)" }, "streaming request with an unknown, used or expired token");
      return refuse(socket, 404, "Not Found", "unknown, used or expired streaming token");
    }
    const upgrade = (req.headers.upgrade ?? "").toLowerCase();
    if (upgrade === "websocket") {
      const offered = String(req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim()).filter(Boolean);
      const supported = request.kind === "portforward" ? [WEBSOCKET_PORTFORWARD_PROTOCOL] : WEBSOCKET_PROTOCOLS;
      if (offered.length > 0 && !offered.some((p) => supported.includes(p))) {
        return refuse(socket, 400, "Bad Request", `none of the offered subprotocols [${offered.join(", ")}] is supported; supported: [${supported.join(", ")}]`);
      }
      (req as IncomingMessage & { cridockKind?: Kind }).cridockKind = request.kind;
      if (request.kind === "portforward" && offered.length > 0) {
        // `ws` rejects subprotocols that are not RFC 7230 tokens, and this one holds a "/":
        // take the negotiation out of its hands and answer with the header ourselves.
        delete req.headers["sec-websocket-protocol"];
        (req as IncomingMessage & { cridockProtocol?: string }).cridockProtocol = WEBSOCKET_PORTFORWARD_PROTOCOL;
      }
      this.webSockets().then(
        ({ server, ws }) => server.handleUpgrade(req, socket, head, (client) => this.onWebSocket(client, request, ws.createWebSocketStream)),
        (err: unknown) => {
          this.log.error({ err }, "cannot load the WebSocket server");
          refuse(socket, 500, "Internal Server Error", "WebSocket streaming is unavailable");
        },
      );
      return;
    }
    if (upgrade === "spdy/3.1") return this.onSpdy(req, socket, head, request);
    refuse(socket, 400, "Bad Request", `unsupported upgrade ${JSON.stringify(req.headers.upgrade ?? "")}; use SPDY/3.1 or websocket`);
  }

  private onSpdy(req: IncomingMessage, socket: Duplex, head: Buffer, request: StreamRequest): void {
    const raw = req.headers["x-stream-protocol-version"];
    const offered = (Array.isArray(raw) ? raw.join(",") : (raw ?? "")).split(",").map((p) => p.trim()).filter(Boolean);
    const supported = request.kind === "portforward" ? [PORTFORWARD_PROTOCOL] : SPDY_PROTOCOLS;
    // No header at all means an old client that speaks the first version.
    const chosen = offered.length === 0 ? (request.kind === "portforward" ? PORTFORWARD_PROTOCOL : PROTOCOL_V1) : supported.find((p) => offered.includes(p));
    if (!chosen) {
      return refuse(socket, 403, "Forbidden", `none of the offered stream protocols [${offered.join(", ")}] is supported; supported: [${supported.join(", ")}]`);
    }
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n" +
        (offered.length > 0 ? `X-Stream-Protocol-Version: ${chosen}\r\n` : "") +
        "\r\n",
    );
    if (head.length > 0) socket.unshift(head);
    this.runSpdySession(socket, request, chosen);
  }

  private runSpdySession(socket: Duplex, request: StreamRequest, protocol: string): SpdySession {
    const log = this.log.child({ kind: request.kind, transport: "spdy", protocol });
    const timeout = this.options.streamCreationTimeoutMs ?? 30_000;
    let session: SpdySession;
    let done: () => Promise<void> = () => Promise.resolve();
    if (request.kind === "portforward") {
      const handler = new SpdyPortForward(this.options.portForwards, request, log, timeout);
      session = new SpdySession(socket, { log, onStream: handler.onStream, writeStallTimeoutMs: this.options.writeStallTimeoutMs });
      session.once("close", () => handler.close());
    } else {
      const handler = new SpdyRemoteCommand(this.options.commands, request, protocolVersion(protocol), log, timeout);
      session = new SpdySession(socket, { log, onStream: handler.onStream, writeStallTimeoutMs: this.options.writeStallTimeoutMs });
      handler.attach(session);
      done = () => handler.whenDone();
    }
    this.track({ close: () => session.destroy(), done: new Promise<void>((resolve) => session.once("close", () => resolve(done()))) }, (gone) =>
      session.once("close", gone),
    );
    return session;
  }

  private onWebSocket(ws: WebSocket, request: StreamRequest, createWebSocketStream: typeof import("ws").createWebSocketStream): void {
    const log = this.log.child({ kind: request.kind, transport: "websocket", protocol: ws.protocol });
    // Invalid frames from the client end up here; ws closes the connection itself.
    ws.on("error", (err) => log.debug({ err }, "WebSocket protocol error from the client"));
    let finished: Promise<void> = Promise.resolve();
    const entry = { close: () => ws.terminate(), done: new Promise<void>((resolve) => ws.once("close", () => resolve(finished))) };
    this.track(entry, (gone) => ws.once("close", gone));
    if (request.kind === "portforward") {
      // The tunnelled SPDY bytes travel in binary messages.
      const tunnel = createWebSocketStream(ws, { allowHalfOpen: false });
      tunnel.on("error", () => undefined);
      this.runSpdySession(tunnel, request, PORTFORWARD_PROTOCOL);
      return;
    }
    finished = serveWebSocketRemoteCommand(ws, ws.protocol, request, this.options.commands, {
      log,
      writeStallTimeoutMs: this.options.writeStallTimeoutMs ?? 0,
    }).catch((err: unknown) => {
      log.warn({ err }, "WebSocket session failed");
      ws.terminate();
    });
  }

  private track(session: { close(): void; done: Promise<void> }, onClosed: (gone: () => void) => void): void {
    this.live.add(session);
    onClosed(() => this.live.delete(session));
  }
}

function refuse(socket: Duplex, code: number, reason: string, message: string): void {
  const body = `${message}\n`;
  socket.end(`HTTP/1.1 ${code} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  setTimeout(() => socket.destroy(), 1000).unref();
}
