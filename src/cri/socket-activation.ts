/**
 * `fd://`: serving CRI on the listening unix socket systemd passes
 * (cridock.socket, as cri-dockerd's cri-docker.socket). systemd hands it as
 * fd 3 with LISTEN_FDS=1 and LISTEN_PID=<our pid> (sd_listen_fds(3)).
 * grpc-js cannot bind an fd itself, but its Server.createConnectionInjector
 * takes connections accepted elsewhere: a node:net Server listening on the
 * inherited fd accepts them and injects each into gRPC. Works on Node and
 * Deno 2 (both implement `listen({ fd })`).
 */
import { createServer, type Server as NetServer } from "node:net";
import process from "node:process";
import type { Server, ServerCredentials } from "@grpc/grpc-js";
import { CridockError } from "../errors.ts";

/** The first fd systemd passes (SD_LISTEN_FDS_START). */
export const LISTEN_FDS_START = 3;

/** Checks the LISTEN_* variables; returns the fd to serve on or says what is wrong. */
export function inheritedListenFd(env: Record<string, string | undefined>, pid: number): number {
  const fds = Number(env.LISTEN_FDS ?? "");
  const listenPid = env.LISTEN_PID;
  if (!env.LISTEN_FDS || !Number.isInteger(fds) || fds < 1) {
    throw new CridockError(
      "FAILED_PRECONDITION",
      "--container-runtime-endpoint=fd:// needs a socket passed by systemd (LISTEN_FDS is not set): start cridock through cridock.socket, or use a unix:// endpoint",
    );
  }
  if (listenPid !== undefined && listenPid !== "" && Number(listenPid) !== pid) {
    throw new CridockError("FAILED_PRECONDITION", `LISTEN_PID=${listenPid} is not this process (${pid}): the passed sockets are meant for another process`);
  }
  if (fds > 1) throw new CridockError("FAILED_PRECONDITION", `systemd passed ${fds} sockets; cridock serves exactly one (ListenStream= once in the socket unit)`);
  return LISTEN_FDS_START;
}

export interface InheritedSocket {
  /** Stops accepting (the socket itself stays open in systemd, which queues new connections). */
  close(): Promise<void>;
}

export async function serveInheritedSocket(grpc: Server, credentials: ServerCredentials, fd: number): Promise<InheritedSocket> {
  const injector = grpc.createConnectionInjector(credentials);
  const listener: NetServer = createServer((socket) => injector.injectConnection(socket));
  await new Promise<void>((resolve, reject) => {
    listener.once("error", (err) => reject(new CridockError("UNAVAILABLE", `cannot serve on the socket systemd passed (fd ${fd})`, { cause: err })));
    listener.listen({ fd }, () => resolve());
  });
  // The variables are for us only: children (CNI plugins, nsenter) must not think they were passed sockets.
  delete process.env.LISTEN_FDS;
  delete process.env.LISTEN_PID;
  delete process.env.LISTEN_FDNAMES;
  return {
    // net.Server.close's callback waits for every accepted connection to end; those are
    // gRPC's now (drained or cut by the server's own shutdown), so only stop accepting.
    close: async () => {
      listener.close();
    },
  };
}
