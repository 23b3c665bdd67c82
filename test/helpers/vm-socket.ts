/**
 * A unix socket of the guest reached from the host: a local socket whose
 * each connection is carried by one `vm/node.sh ssh NAME socat …` (socat is
 * in the guest image), so that a host client (a gRPC one: one connection
 * per channel) talks to the guest's cridock as a local one would. For the
 * RPCs crictl has no verb for.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./cridock-process.ts";
import { shellQuote } from "./vm-node.ts";

export interface ForwardedSocket {
  /** The host's end: unix:// + this path. */
  path: string;
  close(): Promise<void>;
}

export async function forwardGuestSocket(vmName: string, guestPath: string): Promise<ForwardedSocket> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-vm-socket-"));
  const path = join(dir, "guest.sock");
  const relays = new Set<ChildProcess>();
  const server = createServer((socket: Socket) => {
    const relay = spawn("bash", [join(REPO_ROOT, "scripts/vm/node.sh"), "ssh", vmName, `exec socat STDIO UNIX-CONNECT:${shellQuote(guestPath)}`], {
      stdio: ["pipe", "pipe", "ignore"],
      detached: true,
    });
    relays.add(relay);
    socket.pipe(relay.stdin!);
    relay.stdout!.pipe(socket);
    const end = () => {
      socket.destroy();
      try {
        process.kill(-relay.pid!, "SIGTERM");
      } catch {
        // gone already
      }
    };
    relay.on("close", () => {
      relays.delete(relay);
      socket.destroy();
    });
    relay.stdin!.on("error", end);
    socket.on("error", end);
    socket.on("close", end);
  });
  await new Promise<void>((resolve, reject) => server.listen(path, resolve).once("error", reject));
  return {
    path,
    async close() {
      for (const relay of relays) {
        try {
          process.kill(-relay.pid!, "SIGTERM");
        } catch {
          // gone already
        }
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
