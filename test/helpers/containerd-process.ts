/**
 * Runs containerd 2.x with its own CRI plugin as a child process on a
 * private socket, root and state, for the node benchmark's third column:
 * what a node without Docker pays (scripts/bench/build-containerd.sh builds
 * it from the Go module proxy; nothing of it is part of cridock). It
 * answers to the same shape as a cridock child (cridock-process.ts), so the
 * kubelet harness can run it behind kubelet like the other two.
 *
 * Its pods use the same CNI plugins, network and pause image as the others;
 * images come from the test registry over plain HTTP (a hosts.toml per
 * registry), and runc from RUNC_DIR or the PATH. Its stop removes every pod
 * it still has (CRI stop and remove), then unmounts what its root and state
 * kept mounted, since a shim and its containers outlive containerd.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CridockProcess, serveChild } from "./cridock-process.ts";
import { REGISTRY } from "./env.ts";
import { unmountUnder } from "./mounts.ts";

export interface ContainerdOptions {
  /** The directory with `containerd` and `containerd-shim-runc-v2`. */
  binDir: string;
  /** Where runc is (the engine's own, to run the same runc as Docker's arms); the PATH's otherwise. */
  runcDir?: string;
  pauseImage: string;
  cniBinDir: string;
  cniConfDir: string;
  socketPath?: string;
  rootDirectory?: string;
  startTimeoutMs?: number;
}

/** containerd 2.x's configuration (version 3): CRI with runc through cgroupfs, like the Docker arms' nodes here. */
function configToml(o: { root: string; state: string; socket: string; certsDir: string; runc: string; options: ContainerdOptions }): string {
  const q = JSON.stringify;
  return `version = 3
root = ${q(o.root)}
state = ${q(o.state)}

[grpc]
  address = ${q(o.socket)}

[ttrpc]
  address = ${q(`${o.socket}.ttrpc`)}

[debug]
  level = "warn"

[plugins.'io.containerd.internal.v1.opt']
  path = ${q(join(o.root, "opt"))}

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${q(o.options.pauseImage)}
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = ${q(o.certsDir)}

[plugins.'io.containerd.cri.v1.runtime']
  # Sandboxes get oom_score_adj -998 otherwise, which a host without CAP_SYS_RESOURCE refuses
  # (runc's init then dies: "can't get final child's PID from pipe"); capped at containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [${q(o.options.cniBinDir)}]
    conf_dir = ${q(o.options.cniConfDir)}
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ${q(o.runc)}
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`;
}

export async function startContainerdProcess(options: ContainerdOptions): Promise<CridockProcess> {
  const scratch = await mkdtemp(join(tmpdir(), "containerd-"));
  const socketPath = options.socketPath ?? join(scratch, "containerd.sock");
  const root = options.rootDirectory ?? join(scratch, "root");
  const state = join(scratch, "state");
  const certsDir = join(scratch, "certs.d");
  // The test registry serves plain HTTP on loopback.
  await mkdir(join(certsDir, REGISTRY), { recursive: true });
  await writeFile(join(certsDir, REGISTRY, "hosts.toml"), `server = "http://${REGISTRY}"\n\n[host."http://${REGISTRY}"]\n  capabilities = ["pull", "resolve"]\n`);
  const runc = options.runcDir ? join(options.runcDir, "runc") : "runc";
  const configPath = join(scratch, "config.toml");
  await writeFile(configPath, configToml({ root, state, socket: socketPath, certsDir, runc, options }));
  const child = spawn(join(options.binDir, "containerd"), ["--config", configPath], {
    // The shim is found on the PATH; runc by its configured path.
    env: { ...process.env, PATH: [options.binDir, options.runcDir, process.env.PATH].filter(Boolean).join(":") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const cleanScratch = async () => {
    unmountUnder(scratch);
    await rm(scratch, { recursive: true, force: true });
  };
  const served = await serveChild({ name: "containerd", child, socketPath, rootDirectory: root, scratch, cleanScratch, startTimeoutMs: options.startTimeoutMs, outputLimit: 2_000_000 });
  return {
    ...served,
    async stop() {
      await removeAllPods(served);
      return served.stop();
    },
    async kill() {
      await removeAllPods(served);
      await served.kill();
      await cleanScratch();
    },
  };
}

/** Stops and removes every pod sandbox the runtime still lists (its containers go with them). */
async function removeAllPods(runtime: CridockProcess): Promise<void> {
  const listed = await runtime.client.call("ListPodSandbox", {}, { timeoutMs: 30_000 }).catch(() => ({ items: [] }));
  for (const sandbox of (listed.items ?? []) as { id: string }[]) {
    await runtime.client.call("StopPodSandbox", { podSandboxId: sandbox.id }, { timeoutMs: 60_000 }).catch(() => undefined);
    await runtime.client.call("RemovePodSandbox", { podSandboxId: sandbox.id }, { timeoutMs: 60_000 }).catch(() => undefined);
  }
}
