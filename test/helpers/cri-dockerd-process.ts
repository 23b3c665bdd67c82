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
import { type CridockProcess, serveChild } from "./cridock-process.ts";

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
  const cleanScratch = () =>
    options.socketPath || options.rootDirectory ? rmdir(scratch).catch(() => undefined) : rm(scratch, { recursive: true, force: true });
  return serveChild({ name: "cri-dockerd", child, socketPath, rootDirectory, scratch, cleanScratch, startTimeoutMs: options.startTimeoutMs, outputLimit: 2_000_000 });
}
