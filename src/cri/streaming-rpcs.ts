/** ExecSync, Exec, Attach, PortForward. */
import type { CallContext, HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { invalidArgument } from "../errors.ts";
import { validateId } from "../runtime/lookup.ts";
import type { ExecService } from "../runtime/exec/manager.ts";
import type { PortForwarder } from "../runtime/exec/port-forward.ts";
import type { StreamingServer } from "../streaming/server.ts";

export interface StreamingRpcDeps {
  exec: ExecService;
  portForwarder: PortForwarder;
  streaming: StreamingServer;
}

/** Guards against absurd timeouts overflowing timers (about 24 days is Node's limit). */
const MAX_TIMEOUT_SECONDS = 2_000_000n;

function validateCmd(cmd: string[] | undefined, containerId: string): string[] {
  if (!cmd || cmd.length === 0 || !cmd[0]) throw invalidArgument(`cmd is required to exec in container ${containerId}`);
  return cmd;
}

export function streamingRpcs({ exec, portForwarder, streaming }: StreamingRpcDeps): HandlerTable {
  return {
    async ExecSync(request: cri.ExecSyncRequest, ctx: CallContext): Promise<cri.ExecSyncResponse> {
      const id = validateId(request.containerId, "container");
      const cmd = validateCmd(request.cmd, id);
      const timeout = request.timeout ?? 0n;
      if (timeout < 0n || timeout > MAX_TIMEOUT_SECONDS) throw invalidArgument(`timeout ${timeout}s is out of range 0..${MAX_TIMEOUT_SECONDS}`);
      const result = await exec.execSync(id, cmd, Number(timeout), ctx.signal);
      return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
    },

    async Exec(request: cri.ExecRequest): Promise<cri.ExecResponse> {
      const id = validateId(request.containerId, "container");
      const cmd = validateCmd(request.cmd, id);
      if (!request.stdin && !request.stdout && !request.stderr) {
        throw invalidArgument("one of stdin, stdout or stderr must be set");
      }
      const containerId = await exec.resolveRunning(id);
      return {
        url: streaming.urlFor({
          kind: "exec",
          containerId,
          cmd,
          tty: request.tty ?? false,
          stdin: request.stdin ?? false,
          stdout: request.stdout ?? false,
          stderr: request.stderr ?? false,
        }),
      };
    },

    async Attach(request: cri.AttachRequest): Promise<cri.AttachResponse> {
      const id = validateId(request.containerId, "container");
      if (!request.stdin && !request.stdout && !request.stderr) {
        throw invalidArgument("one of stdin, stdout or stderr must be set");
      }
      const containerId = await exec.resolveRunning(id);
      return {
        url: streaming.urlFor({
          kind: "attach",
          containerId,
          cmd: [],
          tty: request.tty ?? false,
          stdin: request.stdin ?? false,
          stdout: request.stdout ?? false,
          stderr: request.stderr ?? false,
        }),
      };
    },

    async PortForward(request: cri.PortForwardRequest): Promise<cri.PortForwardResponse> {
      const id = validateId(request.podSandboxId, "pod sandbox");
      const ports = request.port ?? [];
      for (const port of ports) {
        if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalidArgument(`port ${port} is not a TCP port (1-65535)`);
      }
      const sandboxId = await portForwarder.check(id);
      return { url: streaming.urlFor({ kind: "portforward", sandboxId, ports }) };
    },
  };
}
