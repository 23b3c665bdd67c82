/**
 * Per-RPC metrics as a wrapper around the CRI handler tables: calls by
 * method and gRPC code, and latency. It wraps what cri/*-rpcs.ts return, so
 * cri/server.ts stays as it is; RPCs no table provides get a handler that
 * answers UNIMPLEMENTED (as the server would) so those calls are counted too.
 */
import { status } from "@grpc/grpc-js";
import { CridockError } from "../errors.ts";
import { grpcCodeOf } from "../cri/errors.ts";
import type { CallContext, HandlerTable } from "../cri/handlers.ts";
import { methodNames } from "../cri/proto.ts";

export interface RpcObserver {
  /** `code` is the gRPC status name (OK, NOT_FOUND …). */
  rpc(service: string, method: string, code: string, seconds: number): void;
}

type AnyHandler = (request: unknown, ctx: CallContext, ...rest: unknown[]) => Promise<unknown>;

export function instrumentHandlers(service: "RuntimeService" | "ImageService", table: HandlerTable, observer: RpcObserver): HandlerTable {
  const wrapped: HandlerTable = {};
  for (const method of methodNames(service)) {
    const handler = (table[method] as AnyHandler | undefined) ?? unimplemented(service, method);
    const instrumented: AnyHandler = async (request, ctx, ...rest) => {
      const started = performance.now();
      try {
        const result = await handler(request, ctx, ...rest);
        observer.rpc(service, method, "OK", (performance.now() - started) / 1000);
        return result;
      } catch (err) {
        observer.rpc(service, method, status[grpcCodeOf(err)] ?? "UNKNOWN", (performance.now() - started) / 1000);
        throw err;
      }
    };
    wrapped[method] = instrumented as HandlerTable[string];
  }
  return wrapped;
}

function unimplemented(service: string, method: string): AnyHandler {
  return async () => {
    throw new CridockError("UNIMPLEMENTED", `cridock does not implement runtime.v1.${service}/${method}`);
  };
}
