/**
 * A throwaway dockerd with its own socket, data root, exec root and bridge,
 * and no iptables rules, for tests that stop and start the Docker daemon
 * without disturbing the node's own dockerd.
 *
 * It must not run with --bridge=none: a dockerd started that way deletes the
 * host's docker0 link, breaking the node's own dockerd. It gets a bridge of
 * its own instead, created here and deleted by destroy().
 *
 * The binary is `dockerd` on PATH unless CRIDOCK_TEST_DOCKERD_BIN (or the
 * `binary` option) names another engine build, such as the Engine 29 that
 * scripts/env/install-docker-engine.sh builds. That build's directory then comes
 * first on PATH, because the runc beside it is the one it needs (containerd's
 * shim looks runc up on PATH), and its docker-proxy is named explicitly.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { existsSync } from "node:fs";
import { dirname, join, isAbsolute } from "node:path";
import { request } from "node:http";
import { unmountUnder } from "./mounts.ts";

export interface PrivateDockerd {
  socketPath: string;
  endpoint: string;
  /** Its own working directory (data and exec roots, pid file, configuration). */
  dir: string;
  pidFile: string;
  /** Its daemon.json (`--config-file`), when asked for one; else it reads none of its own. */
  configFile?: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: "/_ping", timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

export const PRIVATE_BRIDGE = "cridock-pd0";

function ip(...args: string[]): { ok: boolean; stderr: string } {
  const res = spawnSync("ip", args, { encoding: "utf8" });
  return { ok: res.status === 0, stderr: res.stderr };
}

export interface PrivateDockerdOptions {
  /** Docker's own bridge (default PRIVATE_BRIDGE); give each concurrent daemon its own. */
  bridge?: string;
  /** dockerd binary; default $CRIDOCK_TEST_DOCKERD_BIN or `dockerd` on PATH. */
  binary?: string;
  /** Give it a daemon.json of its own (starting as `{}`), never the node's /etc/docker/daemon.json. */
  configFile?: boolean;
}

export async function privateDockerd(options: PrivateDockerdOptions = {}): Promise<PrivateDockerd> {
  const bridge = options.bridge ?? PRIVATE_BRIDGE;
  const binary = options.binary ?? (process.env.CRIDOCK_TEST_DOCKERD_BIN || "dockerd");
  const dir = await mkdtemp(join(tmpdir(), "cridock-dockerd-"));
  if (!ip("link", "show", bridge).ok) {
    const added = ip("link", "add", bridge, "type", "bridge");
    if (!added.ok) throw new Error(`cannot create bridge ${bridge}: ${added.stderr}`);
  }
  const socketPath = join(dir, "docker.sock");
  const binDir = isAbsolute(binary) ? dirname(binary) : undefined;
  const proxy = binDir && join(binDir, "docker-proxy");
  const extraFlags = proxy && existsSync(proxy) ? [`--userland-proxy-path=${proxy}`] : [];
  const env = binDir ? { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ""}` } : process.env;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const pidFile = join(dir, "docker.pid");
  const configFile = options.configFile ? join(dir, "daemon.json") : undefined;
  if (configFile) await writeFile(configFile, "{}\n");

  const self: PrivateDockerd = {
    socketPath,
    endpoint: `unix://${socketPath}`,
    dir,
    pidFile,
    configFile,
    async start() {
      child = spawn(
        binary,
        [
          `--host=unix://${socketPath}`,
          `--data-root=${join(dir, "data")}`,
          `--exec-root=${join(dir, "exec")}`,
          `--pidfile=${pidFile}`,
          ...(configFile ? [`--config-file=${configFile}`] : []),
          `--bridge=${bridge}`,
          "--iptables=false",
          "--ip-masq=false",
          "--ip-forward=false",
          ...extraFlags,
        ],
        { stdio: ["ignore", "ignore", "pipe"], env },
      );
      let log = "";
      child.stderr!.on("data", (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
      const proc = child;
      exited = new Promise((resolve) => proc.once("exit", () => resolve()));
      for (let i = 0; i < 120; i++) {
        if (await ping(socketPath)) return;
        if (proc.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`private dockerd did not start:\n${log}`);
    },
    async stop() {
      if (!child || child.exitCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
    async destroy() {
      await self.stop();
      ip("link", "delete", bridge);
      // Left mounted only when dockerd did not stop cleanly (or its mount propagated elsewhere).
      unmountUnder(dir);
      await rm(dir, { recursive: true, force: true }).catch(async () => {
        const pid = await readFile(join(dir, "docker.pid"), "utf8").catch(() => "");
        throw new Error(`could not clean ${dir} (dockerd pid ${pid})`);
      });
    },
  };
  return self;
}
