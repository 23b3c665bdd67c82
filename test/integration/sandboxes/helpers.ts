/**
 * Shared setup of the sandbox integration tests: a cridock child process on
 * a private CNI conf dir, bridge, subnet, result cache and root directory,
 * and the leak check every test ends with (containers, netns bind mounts,
 * veths on the bridge, host-local allocations, cached CNI results, portmap
 * rules).
 */
import { execFileSync } from "node:child_process";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Test } from "tap";
import { startCridockProcess, type CridockProcess } from "../../helpers/cridock-process.ts";
import { CNI_BIN_DIR, PAUSE_IMAGE, makeCniConfDir, type CniConfDir } from "../../helpers/env.ts";

/** Not the shared test bridge/subnet (cridock-t0, 10.89/16), so veth and IP counts are ours alone. */
export const SANDBOX_TEST_BRIDGE = "cridock-sb0";
export const SANDBOX_TEST_SUBNET = "10.91.0.0/24";

export interface SandboxEnv {
  cridock: CridockProcess;
  cni: CniConfDir;
  cacheDir: string;
  scratch: string;
  flags: string[];
  /** Restarts cridock on the same socket, root and cache (after a kill). */
  restart(): Promise<CridockProcess>;
}

export const SANDBOX_TEST_NETWORK = "cridock-sb";

/**
 * The test CNI conf dir with the firewall plugin added after bridge:
 * dockerd sets the FORWARD policy to DROP and br_netfilter sends bridged
 * traffic through it, so pod-to-pod traffic needs firewall's accept rules.
 * `extraPlugins` are appended to the list (fault-injection plugins).
 */
export async function sandboxCniConf(extraPlugins: Record<string, unknown>[] = []): Promise<CniConfDir> {
  const cni = await makeCniConfDir({ bridge: SANDBOX_TEST_BRIDGE, subnet: SANDBOX_TEST_SUBNET, networkName: SANDBOX_TEST_NETWORK });
  const file = join(cni.dir, `10-${SANDBOX_TEST_NETWORK}.conflist`);
  const list = JSON.parse(await readFile(file, "utf8")) as { plugins: Record<string, unknown>[] };
  list.plugins.splice(1, 0, { type: "firewall" });
  list.plugins.push(...extraPlugins);
  await writeFile(file, JSON.stringify(list, null, 2) + "\n");
  return cni;
}

export async function startSandboxEnv(t: Test, options: { extraBinDir?: string; cni?: CniConfDir } = {}): Promise<SandboxEnv> {
  const cni = options.cni ?? (await sandboxCniConf());
  const scratch = await mkdtemp(join(tmpdir(), "cridock-sb-"));
  const cacheDir = join(scratch, "cni-cache");
  const binDirs = [options.extraBinDir, CNI_BIN_DIR].filter(Boolean).join(",");
  const flags = [
    `--pod-infra-container-image=${PAUSE_IMAGE}`,
    "--network-plugin=cni",
    `--cni-conf-dir=${cni.dir}`,
    `--cni-bin-dir=${binDirs}`,
    `--cni-cache-dir=${cacheDir}`,
  ];
  const socketPath = join(scratch, "cri.sock");
  const rootDirectory = join(scratch, "root");
  const env: SandboxEnv = {
    cridock: await startCridockProcess({ flags, socketPath, rootDirectory }),
    cni,
    cacheDir,
    scratch,
    flags,
    async restart() {
      env.cridock = await startCridockProcess({ flags, socketPath, rootDirectory });
      return env.cridock;
    },
  };
  t.teardown(async () => {
    // A failed test may leave pods behind: remove them through cridock so the next test starts clean.
    await removeAllTestPods(env).catch(() => undefined);
    await env.cridock.stop();
    await cni.cleanup();
    await rm(scratch, { recursive: true, force: true });
  });
  return env;
}

export function podConfig(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    metadata: { name, namespace: "cridock-sb", uid: `uid-${name}`, attempt: 0 },
    labels: { test: "sandboxes", pod: name },
    annotations: { "cridock.test/pod": name },
    linux: {},
    ...extra,
  };
}

export function docker(...args: string[]): string {
  return execFileSync("docker", args, { encoding: "utf8", timeout: 60_000 }).trim();
}

/** Host-local's allocation files (one per IP in use). */
export async function allocatedIps(cni: CniConfDir): Promise<string[]> {
  try {
    const files = await readdir(join(cni.ipamDataDir, cni.networkName));
    return files.filter((f) => !f.startsWith("last_reserved_ip") && f !== "lock");
  } catch {
    return [];
  }
}

export async function vethsOnBridge(bridge: string): Promise<string[]> {
  try {
    const out = execFileSync("ip", ["-o", "link", "show", "master", bridge], { encoding: "utf8" });
    return out.split("\n").filter(Boolean);
  } catch {
    return []; // no bridge yet
  }
}

/** Asserts that nothing of this environment's pods is left anywhere. */
export async function assertNoLeaks(t: Test, env: SandboxEnv): Promise<void> {
  const root = env.cridock.rootDirectory;
  const containers = docker("ps", "-aq", "--filter", `label=io.cridock.root=${root}`);
  t.equal(containers, "", "no pause container is left");
  const workloads = docker("ps", "-aq", "--filter", "label=cridock.test=sandboxes");
  t.equal(workloads, "", "no workload container is left");
  const mounts = (await readFile("/proc/self/mountinfo", "utf8")).split("\n").filter((l) => l.includes(root));
  t.same(mounts, [], "no netns bind mount is left");
  t.same(await listOrEmpty(join(root, "netns")), [], "no netns handle file is left");
  t.same(await listOrEmpty(join(root, "sandbox")), [], "no checkpoint is left");
  t.same(await vethsOnBridge(SANDBOX_TEST_BRIDGE), [], "no veth is left on the bridge");
  t.same(await allocatedIps(env.cni), [], "no IP stays allocated");
  t.same(await listOrEmpty(join(env.cacheDir, "results")), [], "no cached CNI result is left");
  const rules = [execFileSync("iptables-save", { encoding: "utf8" })]
    .join("")
    .split("\n")
    .filter((l) => l.includes(`"${SANDBOX_TEST_NETWORK}"`) || l.includes(SANDBOX_TEST_SUBNET.replace("0/24", "")));
  t.same(rules.filter((l) => !l.startsWith(":")), [], "no portmap or firewall rule of a pod is left");
}

async function listOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

export async function removeAllTestPods(env: SandboxEnv): Promise<void> {
  const { items } = await env.cridock.client.call("ListPodSandbox", { filter: { labelSelector: { test: "sandboxes" } } });
  for (const item of items as { id: string }[]) await removePod(env, item.id).catch(() => undefined);
}

/** Runs a sandbox and returns its id and primary IP. */
export async function runPod(env: SandboxEnv, config: Record<string, unknown>): Promise<{ id: string; ip: string }> {
  const { podSandboxId } = await env.cridock.client.call("RunPodSandbox", { config });
  const { status } = await env.cridock.client.call("PodSandboxStatus", { podSandboxId });
  return { id: podSandboxId, ip: status.network.ip };
}

export async function removePod(env: SandboxEnv, id: string): Promise<void> {
  await env.cridock.client.call("StopPodSandbox", { podSandboxId: id });
  await env.cridock.client.call("RemovePodSandbox", { podSandboxId: id });
}

/** A workload container in the pod, labelled as cridock's containers are, so Stop/Remove of the sandbox find it. */
export function runInPod(sandboxId: string, image: string, detach: boolean, ...command: string[]): string {
  const args = ["run", ...(detach ? ["-d"] : ["--rm"]), "--network", `container:${sandboxId}`, "--ipc", `container:${sandboxId}`];
  args.push("--label", "io.kubernetes.docker.type=container", "--label", `io.kubernetes.sandbox.id=${sandboxId}`, "--label", "cridock.test=sandboxes");
  return docker(...args, image, ...command);
}

/** A directory (removed at teardown) with a shell-script CNI plugin `name`. */
export async function scriptPlugin(t: Test, name: string, body: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-plugin-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, name), `#!/bin/sh\n${body}\n`);
  await chmod(join(dir, name), 0o755);
  return dir;
}

/** A plugin body that passes the previous result on for ADD (prevResult is the last key cridock writes) and succeeds otherwise. */
export const PASS_THROUGH = `conf=$(cat)
if [ "$CNI_COMMAND" = ADD ]; then printf '%s' "$conf" | sed -n 's/.*"prevResult":\\(.*\\)}$/\\1/p'; fi
exit 0`;
