/**
 * Clients for kubelet's streaming endpoints (/exec, /attach, /portForward),
 * which kubelet proxies to cridock's streaming server: SPDY/3.1 over TLS
 * (the test SPDY client on a TLS socket) and WebSocket (`v5.channel.k8s.io`
 * for exec/attach; for port-forward the SPDY session tunnelled in WebSocket
 * frames, as client-go does).
 */
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import WebSocket, { createWebSocketStream } from "ws";
import { SpdyTestClient } from "../../helpers/spdy-client.ts";
import { readUpgradeResponse } from "../../helpers/upgrade-response.ts";

export interface CommandResult {
  stdout: string;
  stderr: string;
  /** The error channel's message (a v1.Status JSON for v4+), "" when none. */
  status: string;
}

/** POSTs an SPDY/3.1 upgrade to kubelet and returns the session. */
export async function spdyUpgrade(port: number, path: string, protocols: string[]): Promise<SpdyTestClient> {
  const socket: TLSSocket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
  await new Promise<void>((resolve, reject) => socket.once("secureConnect", resolve).once("error", reject));
  const versions = protocols.map((p) => `X-Stream-Protocol-Version: ${p}\r\n`).join("");
  socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n${versions}Content-Length: 0\r\n\r\n`);
  const { head, status, rest } = await readUpgradeResponse(socket);
  if (status !== 101) {
    socket.destroy();
    throw new Error(`kubelet refused the SPDY upgrade of ${path}: ${head}\n${rest.toString()}`);
  }
  return SpdyTestClient.adopt(socket, rest);
}

/** exec/attach over SPDY (v4.channel.k8s.io): stdout, stderr and the error channel. */
/** `until`: stop once the output so far satisfies it (attach never ends by itself). */
export async function spdyCommand(port: number, path: string, stdin?: string, until?: (r: CommandResult) => boolean): Promise<CommandResult> {
  const client = await spdyUpgrade(port, path, ["v4.channel.k8s.io"]);
  try {
    const error = await client.open({ streamtype: "error" });
    const stdout = await client.open({ streamtype: "stdout" });
    const stderr = await client.open({ streamtype: "stderr" });
    if (stdin !== undefined) {
      const input = await client.open({ streamtype: "stdin" });
      // Attach (`until` given) keeps stdin open: its session ends with the client, not with stdin.
      client.send(input, stdin, !until);
    }
    const result = (): CommandResult => ({
      stdout: client.received(stdout).data.toString(),
      stderr: client.received(stderr).data.toString(),
      status: client.received(error).data.toString(),
    });
    await client.waitFor(() => client.received(error).fin || client.closed || (until?.(result()) ?? false), 30_000);
    return result();
  } finally {
    client.close();
  }
}

/** exec/attach over WebSocket (v5.channel.k8s.io): 1 stdout, 2 stderr, 3 error; 0 stdin, 255 close. */
export async function wsCommand(port: number, path: string, stdin?: string, until?: (r: CommandResult) => boolean): Promise<CommandResult> {
  const ws = new WebSocket(`wss://127.0.0.1:${port}${path}`, ["v5.channel.k8s.io"], { rejectUnauthorized: false });
  const out = { stdout: "", stderr: "", status: "" };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => (ws.terminate(), reject(new Error(`WebSocket ${path} did not finish`))), 30_000);
    ws.on("unexpected-response", (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`kubelet refused the WebSocket upgrade of ${path}: ${res.statusCode}`));
    });
    ws.on("open", () => {
      if (stdin !== undefined) {
        ws.send(Buffer.concat([Buffer.from([0]), Buffer.from(stdin)]));
        if (!until) ws.send(Buffer.from([255, 0]));
      }
    });
    ws.on("message", (data: Buffer) => {
      const channel = data[0];
      const text = data.subarray(1).toString();
      if (channel === 1) out.stdout += text;
      else if (channel === 2) out.stderr += text;
      else if (channel === 3) out.status += text;
      if (until?.(out)) ws.close();
    });
    ws.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
    ws.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
  return out;
}

/**
 * One HTTP GET to `port` of the pod through port-forward, over SPDY or
 * over WebSocket (SPDY tunnelled); resolves to the raw response.
 */
export async function portForwardGet(kubeletPort: number, path: string, podPort: number, transport: "spdy" | "websocket"): Promise<string> {
  let client: SpdyTestClient;
  let ws: WebSocket | undefined;
  if (transport === "spdy") {
    client = await spdyUpgrade(kubeletPort, path, ["portforward.k8s.io"]);
  } else {
    const tunnel = await wsTunnel(kubeletPort, path, "SPDY/3.1+portforward.k8s.io");
    ws = tunnel.ws;
    client = new SpdyTestClient(tunnel.stream);
  }
  try {
    const headers = { port: String(podPort), requestid: "0" };
    const error = await client.open({ ...headers, streamtype: "error" }, true);
    const data = await client.open({ ...headers, streamtype: "data" });
    client.send(data, "GET / HTTP/1.0\r\nHost: pod\r\n\r\n");
    await client.waitFor(() => client.received(data).fin || client.received(error).data.length > 0, 30_000);
    const failure = client.received(error).data.toString();
    if (failure) throw new Error(`port-forward error: ${failure}`);
    return client.received(data).data.toString();
  } finally {
    client.close();
    ws?.terminate();
  }
}

/**
 * A client WebSocket whose subprotocol is not an RFC 7230 token
 * (`SPDY/3.1+portforward.k8s.io`, which the ws client refuses to send): the
 * handshake is written by hand, then ws takes over the socket for framing.
 */
async function wsTunnel(port: number, path: string, protocol: string): Promise<{ ws: WebSocket; stream: Duplex }> {
  const socket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
  await new Promise<void>((resolve, reject) => socket.once("secureConnect", resolve).once("error", reject));
  const key = randomBytes(16).toString("base64");
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Protocol: ${protocol}\r\n\r\n`,
  );
  const { head, status, rest } = await readUpgradeResponse(socket);
  if (status !== 101) {
    socket.destroy();
    throw new Error(`kubelet refused the WebSocket upgrade of ${path}: ${head}`);
  }
  if (!head.toLowerCase().includes(`sec-websocket-protocol: ${protocol.toLowerCase()}`)) {
    socket.destroy();
    throw new Error(`the server did not accept subprotocol ${protocol}: ${head}`);
  }
  const ws = new (WebSocket as unknown as new (address: null, protocols: undefined, options: object) => WebSocket)(null, undefined, {});
  const internals = ws as unknown as { _isServer: boolean; setSocket(socket: Duplex, head: Buffer, options: Record<string, unknown>): void };
  internals._isServer = false; // a client masks what it sends
  internals.setSocket(socket, rest, { maxPayload: 64 * 1024 * 1024, skipUTF8Validation: false });
  return { ws, stream: createWebSocketStream(ws) };
}
