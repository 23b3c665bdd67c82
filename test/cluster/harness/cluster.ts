/**
 * The kubeadm cluster of scripts/cluster.sh, as the cluster suite drives it:
 * kubectl with the admin kubeconfig kubeadm wrote, crictl on the cluster's
 * cridock, and the docker CLI on the cluster's dockerd. The suite does not
 * bring the cluster up itself (scripts/test.sh does, once, before the
 * suite); each test works in a namespace of its own and deletes it.
 *
 * Paths follow scripts/k8s/cluster-common.sh; CRIDOCK_CLUSTER_BIN_DIR and
 * KUBECONFIG override them.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Test } from "tap";
import { CRICTL, KUBERNETES_BIN_DIR } from "../../helpers/env.ts";

export const CLUSTER_BIN_DIR = process.env.CRIDOCK_CLUSTER_BIN_DIR ?? KUBERNETES_BIN_DIR;
export const KUBECTL = join(CLUSTER_BIN_DIR, "kubectl");
export const KUBECONFIG = process.env.KUBECONFIG || "/etc/kubernetes/admin.conf";
export const CLUSTER_CRI_ENDPOINT = "unix:///run/cridock-cluster/cridock.sock";
export const CLUSTER_DOCKER_ENDPOINT = "unix:///run/cridock-cluster/docker.sock";
export const NODE_NAME = "cridock-cluster";
export const DNS_DOMAIN = "cluster.local";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** Runs a program to its end; never throws on a non-zero exit (the caller asserts). */
export function run(file: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { env: { ...process.env, ...options.env }, timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : -1) : 0;
        if (err && code === -1 && !(err as { killed?: boolean }).killed && (err as NodeJS.ErrnoException).code === "ENOENT") {
          reject(new Error(`${file} is not there: build it with scripts/env/install-kubernetes.sh`, { cause: err }));
          return;
        }
        resolve({ code, stdout, stderr });
      },
    );
    if (options.input !== undefined) child.stdin!.end(options.input);
    else child.stdin!.end();
  });
}

/** kubectl as the cluster's admin. */
export function kubectl(args: string[], options: RunOptions = {}): Promise<RunResult> {
  return run(KUBECTL, ["--kubeconfig", KUBECONFIG, ...args], options);
}

/** kubectl that must succeed: its stdout, or an error that carries its stderr. */
export async function kubectlOk(args: string[], options: RunOptions = {}): Promise<string> {
  const res = await kubectl(args, options);
  if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${res.code}: ${res.stderr.trim() || res.stdout.trim()}`);
  return res.stdout;
}

/** kubectl get -o json, parsed. */
export async function getJson<T = any>(args: string[]): Promise<T> {
  return JSON.parse(await kubectlOk(["get", ...args, "-o", "json"])) as T;
}

/** Applies manifests (objects) to the cluster. */
export async function apply(namespace: string, ...objects: object[]): Promise<void> {
  const list = { apiVersion: "v1", kind: "List", items: objects };
  await kubectlOk(["-n", namespace, "apply", "-f", "-"], { input: JSON.stringify(list) });
}

export function crictl(args: string[]): Promise<RunResult> {
  return run(CRICTL, ["--runtime-endpoint", CLUSTER_CRI_ENDPOINT, "--timeout", "10s", ...args]);
}

export function docker(args: string[]): Promise<RunResult> {
  return run("docker", ["--host", CLUSTER_DOCKER_ENDPOINT, ...args]);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value other than undefined, or throws with `what` and the last value seen. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 120_000, intervalMs = 1000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
    await sleep(intervalMs);
  }
}

/**
 * A namespace for one test file, deleted (and waited for: every pod gone
 * through CRI) in the test's teardown.
 */
export async function testNamespace(t: { teardown(fn: () => unknown): void }, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString("hex")}`;
  await kubectlOk(["create", "namespace", name]);
  // The default service account appears shortly after the namespace; pods need it.
  await waitFor(`service account default in ${name}`, async () => ((await kubectl(["-n", name, "get", "serviceaccount", "default"])).code === 0 ? true : undefined), 60_000, 500);
  t.teardown(async () => {
    await kubectl(["delete", "namespace", name, "--wait=true", "--timeout=180s"], { timeoutMs: 200_000 });
  });
  return name;
}

/** Waits for a pod to be Ready, and returns it. */
export async function waitPodReady(namespace: string, name: string, timeoutMs = 180_000): Promise<any> {
  await kubectlOk(["-n", namespace, "wait", "--for=condition=Ready", `pod/${name}`, `--timeout=${Math.round(timeoutMs / 1000)}s`], { timeoutMs: timeoutMs + 10_000 });
  return getJson(["-n", namespace, "pod", name]);
}

/** A long-running kubectl (port-forward, logs -f), stopped by the caller. */
export function kubectlSpawn(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(KUBECTL, ["--kubeconfig", KUBECONFIG, ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
}

/**
 * kubectl's two stream transports toward the API server: WebSocket (its
 * default since 1.31) and SPDY (the environment variables turn WebSocket off).
 */
export const TRANSPORTS: { name: string; env: Record<string, string> }[] = [
  { name: "websocket", env: {} },
  { name: "spdy", env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: "false", KUBECTL_PORT_FORWARD_WEBSOCKETS: "false" } },
];

/**
 * Checks that a TCP connection to IP:PORT, a ClusterIP port no Service
 * serves, is refused at once (curl's exit 7, "failed to connect", within a
 * few seconds) from where `exec` runs curl (a pod, the node, node 2's
 * namespace). Left untranslated by kube-proxy it would follow the default
 * route; scripts/k8s/cluster-common.sh (add_service_reject) rejects it.
 */
export async function unservedPortRefused(
  t: Test,
  where: string,
  ip: string,
  port: number,
  exec: (args: string[]) => Promise<RunResult>,
): Promise<void> {
  const started = Date.now();
  const res = await exec(["curl", "-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", `http://${ip}:${port}/`]);
  const seconds = (Date.now() - started) / 1000;
  t.equal(res.code, 7, `TCP ${where} to ${ip}:${port} fails to connect (curl exit ${res.code}, HTTP ${res.stdout || "none"}, ${res.stderr.trim()})`);
  // kubectl exec alone takes a second or two on a loaded machine; a dropped
  // packet would take curl's whole 10 s.
  t.ok(seconds < 8, `and at once (${seconds.toFixed(1)} s), not by a timeout`);
}
