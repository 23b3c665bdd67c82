/**
 * Shared setup of the container integration tests: a cridock child process on
 * the test CNI network with the busybox test image pulled, helpers to run a
 * pod with containers, and checks that nothing leaked.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess, type CridockProcess } from "../../helpers/cridock-process.ts";
import { BUSYBOX_IMAGE, cridockTestFlags, makeCniConfDir, type CniConfDir } from "../../helpers/env.ts";
import type { CriClient } from "../../helpers/cri-client.ts";

export interface Harness {
  cridock: CridockProcess;
  client: CriClient;
  cni: CniConfDir;
  logDir: string;
  /** The flags cridock runs with (to restart it on the same socket and root). */
  cridockFlags: string[];
  /** Pod uids this run created (leak checks look for their containers). */
  uids: string[];
  close(): Promise<void>;
}

export async function startHarness(extraFlags: string[] = []): Promise<Harness> {
  const cni = await makeCniConfDir();
  const cridockFlags = [...cridockTestFlags(cni), ...extraFlags];
  const cridock = await startCridockProcess({ flags: cridockFlags });
  const client = cridock.client;
  await client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  const logDir = await mkdtemp(join(tmpdir(), "cridock-ctr-logs-"));
  const uids: string[] = [];
  return {
    cridock,
    client,
    cni,
    logDir,
    cridockFlags,
    uids,
    async close() {
      await cridock.stop();
      await cni.cleanup();
      await rm(logDir, { recursive: true, force: true });
    },
  };
}

let counter = 0;

export function podConfig(h: Harness, name = `ctr-test-${process.pid}-${++counter}`, extra: object = {}) {
  const uid = `uid-${process.pid}-${Date.now()}-${counter}`;
  h.uids.push(uid);
  return {
    metadata: { name, namespace: "cridock-test", uid, attempt: 0 },
    logDirectory: join(h.logDir, name),
    linux: {},
    ...extra,
  };
}

export async function runPod(h: Harness, extra: object = {}) {
  const config = podConfig(h, undefined, extra);
  const { podSandboxId } = await h.client.call("RunPodSandbox", { config });
  return { podSandboxId: podSandboxId as string, config };
}

export function containerConfig(name: string, command: string[], extra: Record<string, unknown> = {}) {
  return {
    metadata: { name, attempt: 0 },
    image: { image: BUSYBOX_IMAGE },
    command,
    logPath: `${name}.log`,
    ...extra,
  };
}

export async function createContainer(h: Harness, pod: { podSandboxId: string; config: object }, config: object): Promise<string> {
  const { containerId } = await h.client.call("CreateContainer", {
    podSandboxId: pod.podSandboxId,
    config,
    sandboxConfig: pod.config,
  });
  return containerId as string;
}

export async function status(h: Harness, id: string) {
  return (await h.client.call("ContainerStatus", { containerId: id })).status;
}

/** Polls ContainerStatus until the container left RUNNING (bounded). */
export async function waitExited(h: Harness, id: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await status(h, id);
    if (s.state === 2) return s;
    if (Date.now() > deadline) throw new Error(`container ${id} still ${s.state} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the CRI log file holds `lines` records (bounded), returns its text. */
export async function waitLog(path: string, predicate: (text: string) => boolean, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await readFile(path, "utf8").catch(() => "");
    if (predicate(text)) return text;
    if (Date.now() > deadline) throw new Error(`log ${path} did not reach the expected content; it has ${text.length} bytes`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The CRI log file once it stops growing: the writer finishes shortly after
 * the container exits. Two equal non-empty reads `intervalMs` apart, at most
 * `tries` reads; returns the last text either way.
 */
export async function settledLog(path: string, tries = 50, intervalMs = 100): Promise<string> {
  let text = "";
  for (let i = 0; i < tries; i++) {
    const next = await readFile(path, "utf8").catch(() => "");
    if (next === text && next !== "") return text;
    text = next;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return text;
}

/** Stops and removes the pods (and so their containers). */
export async function removePod(h: Harness, podSandboxId: string) {
  await h.client.call("StopPodSandbox", { podSandboxId });
  await h.client.call("RemovePodSandbox", { podSandboxId });
}

/** Docker containers of this run's pods still present (should be none at the end). */
export async function leakedContainers(h: Harness): Promise<string[]> {
  const { execFileSync } = await import("node:child_process");
  const out: string[] = [];
  for (const uid of h.uids) {
    const ids = execFileSync("docker", ["ps", "-aq", "--filter", `label=io.kubernetes.pod.uid=${uid}`, "--filter", `name=_${uid}_`]).toString().trim();
    if (ids) out.push(...ids.split("\n"));
    const byName = execFileSync("docker", ["ps", "-aq", "--filter", `name=_${uid}_`]).toString().trim();
    if (byName) out.push(...byName.split("\n"));
  }
  return [...new Set(out)];
}
