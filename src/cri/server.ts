/**
 * The CRI gRPC server on a unix socket.
 *
 * Socket rules: a stale socket file (nobody answering) is replaced; a live one
 * means another runtime instance serves there and startup fails; the socket is
 * made 0660 so only root and its group can drive containers.
 */
import { connect } from "node:net";
import process from "node:process";
import { chmod, mkdir, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";
import {
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { CridockError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { grpcCodeOf, toServiceError } from "./errors.ts";
import { callContext } from "./call-context.ts";
import type { HandlerTable, StreamHandler, UnaryHandler } from "./handlers.ts";
import { criRoot, serviceDefinition, UndecodableRequest } from "./proto.ts";
import { inheritedListenFd, serveInheritedSocket, type InheritedSocket } from "./socket-activation.ts";

/** Clients (kubelet, crictl) accept 16 MiB messages; so do we. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface CriServerOptions {
  socketPath: string;
  logger: Logger;
  runtimeHandlers: HandlerTable;
  imageHandlers: HandlerTable;
  /** Serve the socket systemd passed (fd://) instead of binding socketPath. */
  socketActivated?: boolean;
}

type ServiceName = "RuntimeService" | "ImageService";

export class CriServer {
  private readonly server: Server;
  private readonly log: Logger;
  private readonly socketPath: string;
  private listening = false;
  private inherited: InheritedSocket | undefined;

  constructor(private readonly options: CriServerOptions) {
    this.log = options.logger.child({ component: "cri" });
    this.socketPath = options.socketPath;
    this.server = new Server({
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
      // Channelz (grpc-js's introspection registry) is read by nothing here, and it costs
      // every connection a registered socket and trace entries and every call its counters
      // and timestamps; crictl opens a connection per command, kubelet's probes come in bursts.
      "grpc.enable_channelz": 0,
    });
    this.server.addService(serviceDefinition("RuntimeService"), this.implement("RuntimeService", options.runtimeHandlers));
    this.server.addService(serviceDefinition("ImageService"), this.implement("ImageService", options.imageHandlers));
  }

  async start(): Promise<void> {
    if (this.options.socketActivated) {
      const fd = inheritedListenFd(process.env, process.pid);
      this.inherited = await serveInheritedSocket(this.server, ServerCredentials.createInsecure(), fd);
      this.listening = true;
      this.log.info({ fd }, "serving CRI on the socket systemd passed (fd://)");
      return;
    }
    await prepareSocketPath(this.socketPath);
    await new Promise<void>((resolve, reject) => {
      this.server.bindAsync(`unix://${this.socketPath}`, ServerCredentials.createInsecure(), (err) =>
        err ? reject(new CridockError("UNAVAILABLE", `cannot listen on ${this.socketPath}`, { cause: err })) : resolve(),
      );
    });
    await chmod(this.socketPath, 0o660);
    this.listening = true;
    this.log.info({ socket: this.socketPath }, "serving CRI");
  }

  /** Stops accepting calls, waits up to graceMs for in-flight ones, removes the socket. */
  async stop(graceMs: number): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    await this.inherited?.close();
    const graceful = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), graceMs);
    });
    if ((await Promise.race([graceful, timedOut])) === "timeout") {
      this.log.warn({ graceMs }, "in-flight calls did not finish in time; cancelling them");
      this.server.forceShutdown();
    }
    clearTimeout(timer);
    // An inherited socket belongs to systemd, which keeps it (and queues calls) across restarts.
    if (!this.inherited) await rm(this.socketPath, { force: true });
    this.log.info({ socket: this.socketPath || "fd://" }, "stopped serving CRI");
  }

  private implement(service: ServiceName, handlers: HandlerTable): UntypedServiceImplementation {
    const impl: UntypedServiceImplementation = {};
    const serviceType = criRoot().lookupService(`runtime.v1.${service}`);
    for (const method of serviceType.methodsArray) {
      const fullName = `runtime.v1.${service}/${method.name}`;
      const handler = handlers[method.name];
      if (method.responseStream) {
        impl[method.name] = this.streamCall(fullName, handler as StreamHandler | undefined);
      } else {
        impl[method.name] = this.unaryCall(fullName, handler as UnaryHandler | undefined);
      }
    }
    return impl;
  }

  private unaryCall(method: string, handler: UnaryHandler | undefined) {
    return (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      if (!handler) {
        callback({ code: status.UNIMPLEMENTED, details: `cridock does not implement ${method}` });
        return;
      }
      const started = performance.now();
      const undecodable = refuseUndecodable(method, call.request);
      if (undecodable) {
        this.logFailure(method, started, undecodable);
        callback(toServiceError(undecodable));
        return;
      }
      const { ctx, done } = callContext(method, call);
      handler(call.request, ctx).then(
        (response) => {
          done();
          this.log.debug({ method, ms: elapsed(started) }, "call ok");
          callback(null, response ?? {});
        },
        (err: unknown) => {
          done();
          this.logFailure(method, started, err);
          callback(toServiceError(err));
        },
      );
    };
  }

  private streamCall(method: string, handler: StreamHandler | undefined) {
    return (call: ServerWritableStream<unknown, unknown>) => {
      if (!handler) {
        call.emit("error", { code: status.UNIMPLEMENTED, details: `cridock does not implement ${method}` });
        return;
      }
      const started = performance.now();
      const undecodable = refuseUndecodable(method, call.request);
      if (undecodable) {
        this.logFailure(method, started, undecodable);
        call.emit("error", toServiceError(undecodable));
        return;
      }
      const { ctx, done } = callContext(method, call);
      const send = (message: unknown) =>
        new Promise<void>((resolve) => {
          if (call.write(message)) resolve();
          else call.once("drain", () => resolve());
        });
      handler(call.request, ctx, send).then(
        () => {
          done();
          this.log.debug({ method, ms: elapsed(started) }, "stream ok");
          call.end();
        },
        (err: unknown) => {
          done();
          this.logFailure(method, started, err);
          call.emit("error", toServiceError(err));
        },
      );
    };
  }

  private logFailure(method: string, started: number, err: unknown) {
    const code = status[grpcCodeOf(err)];
    const fields = { method, ms: elapsed(started), code, err };
    if (err instanceof CridockError && err.code !== "INTERNAL") this.log.info(fields, "call failed");
    else this.log.error(fields, "call failed with an internal error");
  }
}

/** INVALID_ARGUMENT for a request that did not decode (see UndecodableRequest). */
function refuseUndecodable(method: string, request: unknown): CridockError | undefined {
  if (!(request instanceof UndecodableRequest)) return undefined;
  return new CridockError("INVALID_ARGUMENT", `${method}: the request is not a valid ${request.typeName} message: ${request.reason}`);
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

/** Replaces a stale socket file; refuses to take over a live one. */
export async function prepareSocketPath(socketPath: string): Promise<void> {
  await mkdir(dirname(socketPath), { recursive: true });
  const existing = await stat(socketPath).catch(() => undefined);
  if (!existing) return;
  if (!existing.isSocket()) {
    throw new CridockError("FAILED_PRECONDITION", `${socketPath} exists and is not a socket; refusing to replace it`);
  }
  if (await socketAnswers(socketPath)) {
    throw new CridockError(
      "ALREADY_EXISTS",
      `another process is already serving on ${socketPath}; stop it or choose another --container-runtime-endpoint`,
    );
  }
  await rm(socketPath, { force: true });
}

function socketAnswers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    const finish = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once("connect", () => finish(true));
    socket.once("error", () => finish(false));
    socket.setTimeout(2000, () => finish(false));
  });
}
