/**
 * Reading the HTTP/1.1 response to a hand-written upgrade request (SPDY or
 * WebSocket) off a raw socket: the head, and whatever the server sent after
 * it in the same reads, which belongs to the upgraded protocol.
 */
import type { Duplex } from "node:stream";

export interface UpgradeResponse {
  /** The status line and headers, without the blank line. */
  head: string;
  /** The HTTP status code (NaN when the head is not HTTP/1.1). */
  status: number;
  /** Bytes after the head: the first bytes of the upgraded protocol. */
  rest: Buffer;
}

export function readUpgradeResponse(socket: Duplex): Promise<UpgradeResponse> {
  let buffered = Buffer.alloc(0);
  return new Promise((resolve, reject) => {
    const onClose = () => reject(new Error(`connection closed before a response: ${buffered.toString()}`));
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.off("close", onClose);
      const head = buffered.subarray(0, end).toString();
      resolve({ head, status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1]), rest: buffered.subarray(end + 4) });
    };
    socket.on("data", onData);
    socket.once("close", onClose);
  });
}
