/**
 * Runs a cri-dockerd binary (built outside the repository) as a child
 * process on a private socket and root, for the benchmarks that put it
 * beside cridock on the same engine and CNI network. It answers to the same
 * shape as a cridock child (cridock-process.ts), so a harness can run
 * either behind kubelet or crictl.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm, rmdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CriClient } from "./cri-client.ts";
import { accepts, type CridockProcess } from "./cridock-process.ts";

export interface CriDockerdOptions {
  binary: string;
  /** `--docker-endpoint`, network and pause image flags, in cri-dockerd's spelling (it shares cridock's for these). */
  flags: string[];
  socketPath?: string;
  rootDirectory?: string;
  startTimeoutMs?: number;
}

export async function startCriDockerdProcess(options: CriDockerdOptions): Promise<CridockProcess> {
  const scratch = await mkdtemp(join(tmpdir(), "cri-dockerd-"));
  const socketPath = options.socketPath ?? join(scratch, "cri-dockerd.sock");
  const rootDirectory = options.rootDirectory ?? join(scratch, "root");
  const flags = [...options.flags];
  // Port 0: any free port, so it never collides with a cri-dockerd the host runs.
  if (!flags.some((f) => f.startsWith("--streaming-bind-addr"))) flags.push("--streaming-bind-addr=127.0.0.1");
  const child = spawn(
    options.binary,
    [...flags, `--container-runtime-endpoint=unix://${socketPath}`, `--cri-dockerd-root-directory=${rootDirectory}`],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const take = (d: Buffer) => (output = (output + d.toString()).slice(-2_000_000));
  child.stdout!.on("data", take);
  child.stderr!.on("data", take);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  while (!(await accepts(socketPath))) {
    if (child.exitCode !== null) throw new Error(`cri-dockerd exited with ${child.exitCode} before serving:\n${output}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`cri-dockerd did not serve on ${socketPath} in time:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const client = new CriClient(socketPath);
  const cleanScratch = () => (options.socketPath || options.rootDirectory ? rmdir(scratch).catch(() => undefined) : rm(scratch, { recursive: true, force: true }));
  return {
    socketPath,
    rootDirectory,
    child,
    client,
    logs: () => output,
    async stop() {
      client.close();
      if (child.exitCode === null) child.kill("SIGTERM");
      const code = await exited;
      await cleanScratch();
      return code;
    },
    async kill() {
      client.close();
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
      await rmdir(scratch).catch(() => undefined);
    },
  };
}
