/**
 * The CRI runtimes a benchmark puts side by side on the same engine and CNI
 * network: cridock (Node or Deno, from this tree) and, when given, a
 * cri-dockerd binary built outside the repository. Each runs as a fresh
 * process on a private socket and root; the benchmark reads its pid for CPU
 * and memory and drives it through the same CRI client.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CriClient } from "../../test/helpers/cri-client.ts";
import { accepts, startCridockProcess } from "../../test/helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, TEST_DOCKER_ENDPOINT, type CniConfDir } from "../../test/helpers/env.ts";

export interface RuntimeUnderTest {
  name: string;
  pid: number;
  client: CriClient;
  /** What it logged (for a failure report). */
  logs(): string;
  stop(): Promise<void>;
}

export type RuntimeKind =
  /** `entry`: another tree's bin/cridock.js (Node), to put two versions side by side. */
  | { kind: "cridock"; runtime: "node" | "deno"; entry?: string; flags?: string[] }
  | { kind: "cri-dockerd"; binary: string };

export function runtimeName(r: RuntimeKind): string {
  if (r.kind === "cri-dockerd") return "cri-dockerd";
  return r.entry ? `cridock (${r.entry})` : `cridock (${r.runtime})`;
}

export async function startRuntime(r: RuntimeKind, cni: CniConfDir): Promise<RuntimeUnderTest> {
  const cniFlags = [
    `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`,
    `--pod-infra-container-image=${PAUSE_IMAGE}`,
    "--network-plugin=cni",
    `--cni-conf-dir=${cni.dir}`,
    `--cni-bin-dir=${CNI_BIN_DIR}`,
    `--cni-cache-dir=${join(cni.dir, "cache")}`,
  ];
  if (r.kind === "cridock") {
    const p = await startCridockProcess({ runtime: r.runtime, entry: r.entry, flags: [...cniFlags, ...(r.flags ?? ["--log-level=warn"])] });
    return {
      name: runtimeName(r),
      pid: p.child.pid!,
      client: p.client,
      logs: p.logs,
      stop: async () => {
        await p.stop();
      },
    };
  }
  const scratch = await mkdtemp(join(tmpdir(), "cri-dockerd-bench-"));
  const socketPath = join(scratch, "cri-dockerd.sock");
  const child = spawn(
    r.binary,
    [
      ...cniFlags,
      `--container-runtime-endpoint=unix://${socketPath}`,
      `--cri-dockerd-root-directory=${join(scratch, "root")}`,
      // Port 0: any free port, so it never collides with a cri-dockerd the host runs.
      "--streaming-bind-addr=127.0.0.1",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 30_000;
  while (!(await accepts(socketPath))) {
    if (child.exitCode !== null) throw new Error(`cri-dockerd exited with ${child.exitCode} before serving:\n${output}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`cri-dockerd did not serve on ${socketPath} in time:\n${output}`);
    }
    await new Promise((res) => setTimeout(res, 50));
  }
  const client = new CriClient(socketPath);
  return {
    name: runtimeName(r),
    pid: child.pid!,
    client,
    logs: () => output,
    async stop() {
      client.close();
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      await rm(scratch, { recursive: true, force: true });
    },
  };
}
