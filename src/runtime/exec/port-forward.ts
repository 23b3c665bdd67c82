/**
 * Connects a port-forward stream to a TCP port inside a pod.
 *
 * Node cannot enter another network namespace (setns needs a native addon),
 * so for pods with their own network the connection is made by
 * `nsenter --net=<pod netns> socat - TCP4:127.0.0.1:<port>`, as cri-dockerd
 * does: dialling 127.0.0.1 inside the pod reaches listeners bound to the
 * pod's loopback too, which dialling the pod IP would miss. Host-network
 * pods share the host's namespace, so they are dialled directly.
 * Host tools: nsenter (util-linux) and socat.
 */
import { spawn } from "node:child_process";
import { connect } from "node:net";
import type { Duplex } from "node:stream";
import { CridockError, failedPrecondition, invalidArgument } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { SandboxLookup } from "../sandbox/view.ts";

export interface PortForwarderOptions {
  nsenterPath?: string;
  socatPath?: string;
}

const MAX_STDERR = 4096;

export class PortForwarder {
  private readonly log: Logger;
  private readonly nsenter: string;
  private readonly socat: string;

  constructor(
    private readonly sandboxes: SandboxLookup,
    logger: Logger,
    options: PortForwarderOptions = {},
  ) {
    this.log = logger.child({ component: "port-forward" });
    this.nsenter = options.nsenterPath ?? "nsenter";
    this.socat = options.socatPath ?? "socat";
  }

  /** Checks the sandbox can be forwarded to; resolves to its full id. */
  async check(sandboxId: string): Promise<string> {
    const view = await this.sandboxes.view(sandboxId);
    if (!view.hostNetwork && !view.netnsPath && view.pid <= 0) {
      throw failedPrecondition(`pod sandbox ${sandboxId} has no network namespace (is it running?)`);
    }
    return view.id;
  }

  /**
   * Copies `stream` to and from `port` in the sandbox until both directions
   * end. Rejects with the reason when the port cannot be reached. `signal`
   * aborts (the client is gone): the connection and any helper process end.
   */
  async forward(sandboxId: string, port: number, stream: Duplex, signal: AbortSignal): Promise<void> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalidArgument(`port ${port} is not a TCP port`);
    const view = await this.sandboxes.view(sandboxId);
    if (view.hostNetwork) return this.forwardHost(port, stream, signal);
    const netns = view.netnsPath || (view.pid > 0 ? `/proc/${view.pid}/ns/net` : "");
    if (!netns) throw failedPrecondition(`pod sandbox ${sandboxId} has no network namespace (is it running?)`);
    return this.forwardNetns(sandboxId, netns, port, stream, signal);
  }

  private forwardHost(port: number, stream: Duplex, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port, allowHalfOpen: true });
      const onAbort = () => socket.destroy();
      signal.addEventListener("abort", onAbort, { once: true });
      let connected = false;
      socket.once("connect", () => {
        connected = true;
        stream.pipe(socket);
        socket.pipe(stream);
      });
      socket.once("error", (err) => {
        if (!connected) reject(new CridockError("UNAVAILABLE", `cannot connect to port ${port} on the host network`, { cause: err }));
      });
      socket.once("close", () => {
        signal.removeEventListener("abort", onAbort);
        stream.unpipe(socket);
        if (connected) resolve();
      });
      stream.once("close", () => socket.destroy());
    });
  }

  private forwardNetns(sandboxId: string, netns: string, port: number, stream: Duplex, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.nsenter, [`--net=${netns}`, this.socat, "-", `TCP4:127.0.0.1:${port}`], {
        stdio: ["pipe", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => {
        if (stderr.length < MAX_STDERR) stderr += d.toString();
      });
      const kill = () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      };
      signal.addEventListener("abort", kill, { once: true });
      stream.once("close", kill);
      child.stdin.on("error", () => undefined);
      stream.pipe(child.stdin);
      child.stdout.pipe(stream);
      child.once("error", (err) => {
        signal.removeEventListener("abort", kill);
        reject(new CridockError("FAILED_PRECONDITION", `cannot run ${this.nsenter} and ${this.socat} for port-forward (are util-linux and socat installed?)`, { cause: err }));
      });
      child.once("close", (code, sig) => {
        signal.removeEventListener("abort", kill);
        stream.unpipe(child.stdin);
        if (code === 0 || signal.aborted || sig === "SIGKILL") resolve();
        else {
          this.log.debug({ sandboxId, port, code, stderr }, "port-forward helper failed");
          reject(new CridockError("UNAVAILABLE", `cannot forward to port ${port} in pod sandbox ${sandboxId}: ${stderr.trim() || `exit code ${code}`}`));
        }
      });
    });
  }
}
