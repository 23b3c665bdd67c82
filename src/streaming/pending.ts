/**
 * Bounds the connections of the streaming server that have not sent a whole
 * request head yet. Each costs an fd; a client that opens many and sends
 * partial headers (or nothing) would otherwise hold them for as long as it
 * likes. A connection gets `headerTimeoutMs` to finish its request head and
 * at most `maxPending` may be waiting at once; beyond that new connections
 * are closed at once and the first refusal of a burst is logged. Upgraded
 * sessions and answered requests no longer count.
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "../log.ts";

export interface PendingLimits {
  headerTimeoutMs: number;
  maxPending: number;
  log: Logger;
}

/** How often a burst of refusals is logged at most. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

export function limitPendingConnections(server: Server, limits: PendingLimits): { readonly pending: number } {
  const pending = new Map<Socket, ReturnType<typeof setTimeout>>();
  let refused = 0;
  let lastLogged = 0;
  const settle = (socket: Socket) => {
    const timer = pending.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    pending.delete(socket);
  };
  server.on("connection", (socket: Socket) => {
    if (pending.size >= limits.maxPending) {
      refused++;
      if (Date.now() - lastLogged >= REFUSAL_LOG_INTERVAL_MS) {
        lastLogged = Date.now();
        limits.log.warn({ maxPending: limits.maxPending, refusedSoFar: refused, remote: socket.remoteAddress }, "too many streaming connections without a complete request; closing new ones");
      }
      socket.destroy();
      return;
    }
    const timer = setTimeout(() => {
      pending.delete(socket);
      limits.log.debug({ remote: socket.remoteAddress, timeoutMs: limits.headerTimeoutMs }, "streaming connection sent no complete request in time; closed");
      socket.destroy();
    }, limits.headerTimeoutMs);
    timer.unref?.();
    pending.set(socket, timer);
    socket.once("close", () => settle(socket));
  });
  server.on("request", (req: { socket: Socket }) => settle(req.socket));
  server.on("upgrade", (req: { socket: Socket }) => settle(req.socket));
  return {
    get pending() {
      return pending.size;
    },
  };
}
