/**
 * The CRI runtimes a benchmark puts side by side on the same engine and CNI
 * network: cridock (Node or Deno, from this tree) and, when given, a
 * cri-dockerd binary built outside the repository. Each runs as a fresh
 * process on a private socket and root; the benchmark reads its pid for CPU
 * and memory and drives it through the same CRI client.
 */
import { join } from "node:path";
import type { CriClient } from "../../../test/helpers/cri-client.ts";
import { startCriDockerdProcess } from "../../../test/helpers/cri-dockerd-process.ts";
import { startCridockProcess } from "../../../test/helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, TEST_DOCKER_ENDPOINT, type CniConfDir } from "../../../test/helpers/env.ts";

export interface RuntimeUnderTest {
  name: string;
  pid: number;
  /** Its CRI socket, `unix://…` (for crictl). */
  endpoint: string;
  client: CriClient;
  /** What it logged (for a failure report). */
  logs(): string;
  stop(): Promise<void>;
}

export type RuntimeKind =
  /**
   * `entry`: another tree's bin/cridock.js (Node), to put two versions side by side;
   * `nodeFlags`: node's own flags for it (e.g. --cpu-prof, whose profile is written when it stops).
   */
  | { kind: "cridock"; runtime: "node" | "deno"; entry?: string; flags?: string[]; nodeFlags?: string[] }
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
  const p =
    r.kind === "cridock"
      ? await startCridockProcess({ runtime: r.runtime, entry: r.entry, nodeFlags: r.nodeFlags, flags: [...cniFlags, ...(r.flags ?? ["--log-level=warn"])] })
      : await startCriDockerdProcess({ binary: r.binary, flags: cniFlags });
  return {
    name: runtimeName(r),
    pid: p.child.pid!,
    endpoint: `unix://${p.socketPath}`,
    client: p.client,
    logs: p.logs,
    stop: async () => {
      await p.stop();
    },
  };
}
