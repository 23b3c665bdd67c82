/**
 * `cridock oci-layer <action>` run from the sources against a private
 * dockerd, with every path of the layer (launcher, edits, registration,
 * rootfs) inside one scratch directory of the test's: the integration tests
 * that install the layer must never touch the host's own daemon.json or
 * /run/cridock-rootfs.
 */
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { join, resolve } from "node:path";
import type { PrivateDockerd } from "./private-dockerd.ts";

const REPO = resolve(import.meta.dirname, "../..");
const TSX = join(REPO, "node_modules/.bin/tsx");

export type OciLayerCommand = (action: string, ...extra: string[]) => SpawnSyncReturns<string>;

/** The layer's paths under WORK; `launcher` is what dockerd is told to run. */
export function ociLayerPaths(work: string) {
  return {
    launcher: join(work, "oci-runtime"),
    editsDir: join(work, "edits"),
    registration: join(work, "oci-layer.json"),
    rootfsDir: join(work, "rootfs"),
  };
}

export function ociLayerCommand(dockerd: PrivateDockerd, work: string): OciLayerCommand {
  const paths = ociLayerPaths(work);
  if (!dockerd.configFile) throw new Error("the OCI layer's tests need a dockerd started with a daemon.json (configFile: true)");
  const fixed = [
    `--docker-endpoint=${dockerd.endpoint}`,
    `--daemon-json=${dockerd.configFile}`,
    `--docker-pid-file=${dockerd.pidFile}`,
    `--launcher=${paths.launcher}`,
    `--edits-dir=${paths.editsDir}`,
    `--registration=${paths.registration}`,
    `--rootfs-dir=${paths.rootfsDir}`,
  ];
  return (action, ...extra) => spawnSync(TSX, ["src/main.ts", "oci-layer", action, ...fixed, ...extra], { cwd: REPO, encoding: "utf8", timeout: 120_000 });
}
