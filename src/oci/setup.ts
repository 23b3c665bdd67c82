/**
 * The server's side of the OCI runtime layer, set up at start: the lookup
 * that finds the layer in dockerd's runtimes (warning once when there is
 * none), the probe of what user namespaces this node supports, and the
 * sweep of what a start or a delete left when cridock, dockerd or
 * containerd stopped in its middle.
 */
import { join } from "node:path";
import type { DockerClient } from "../docker/client.ts";
import { isNotFound } from "../docker/errors.ts";
import type { Logger } from "../log.ts";
import { SpecEditsStore } from "./edits-store.ts";
import { OciLayerLookup } from "./layer.ts";
import { LayerReregistrar } from "./layer-reregister.ts";
import { RECORD_NAME } from "./registration-record.ts";
import { selfCommand } from "../self-command.ts";
import { mountOptionsSupport, type MountOptionsSupport } from "./mount-options.ts";
import { RootfsSweeper } from "./rootfs-sweeper.ts";
import { UsernsSupportProbe } from "./userns-support.ts";

/** Spec edits older than this were left by a start that never returned. */
const STALE_EDITS_MS = 3_600_000;

export interface OciLayerView {
  layer: OciLayerLookup;
  userns: UsernsSupportProbe;
  /** Whether bind mount options (CRI Mount.mount_options) can be carried out: by the layer alone, and why not without it. */
  mountOptions: () => Promise<MountOptionsSupport>;
  /** Registers the layer again when a tool rewrote daemon.json without it; absent with --oci-layer-reregister=false. */
  reregistrar?: LayerReregistrar;
}

export interface OciLayerSettings {
  /** Where `cridock oci-layer install` records what it registered (registration-record.ts). */
  rootDirectory: string;
  /** --oci-layer-reregister */
  ociLayerReregister: boolean;
}

/** What Docker's API cannot carry goes into the OCI spec through cridock's runtime layer, where dockerd has it. */
export function ociLayerView(docker: DockerClient, log: Logger, settings: OciLayerSettings): OciLayerView {
  // A tool that owns daemon.json (minikube) may rewrite it without the layer and restart dockerd:
  // the server registers it again as install did, where install recorded it (layer-reregister.ts).
  const reregistrar = settings.ociLayerReregister
    ? new LayerReregistrar({
        recordPath: join(settings.rootDirectory, RECORD_NAME),
        info: () => docker.info(),
        cridock: selfCommand(),
        log: log.child({ component: "oci-layer" }),
        onRegistered: () => layer.forget(),
      })
    : undefined;
  const layer = new OciLayerLookup(
    () => docker.info(),
    (reason) => log.warn({ reason }, "no OCI runtime layer: cgroup v2 unified settings are written after each container starts, not before its first instruction"),
    reregistrar && ((reason) => void reregistrar.layerNotReady(reason)),
  );
  // A dockerd that came back (restarted) may have read a daemon.json without the layer: ask it at once, not when the cache expires.
  docker.events.onConnection((connected) => {
    if (!connected) return;
    layer.forget();
    void layer.current({ quiet: true }).catch(() => undefined);
  });
  const userns = new UsernsSupportProbe(
    () => layer.current({ quiet: true }),
    async () => ({ ...(await docker.info()), apiVersion: await docker.apiVersion() }),
  );
  const mountOptions = async () => mountOptionsSupport(await layer.state({ quiet: true }));
  return { layer, userns, mountOptions, reregistrar };
}

/**
 * Removes what a start or a delete left: spec edits (edits-store.ts), once,
 * in the background, and idmapped rootfs (rootfs-sweeper.ts), now and every
 * few minutes until the returned sweeper is stopped. Failures are logged;
 * nothing waits for them.
 */
export function sweepOciLeftovers(lookup: OciLayerLookup, docker: DockerClient, log: Logger): RootfsSweeper {
  void lookup.current({ quiet: true }).then(async (layer) => {
    if (!layer) return;
    await new SpecEditsStore(layer.editsDir)
      .sweep(STALE_EDITS_MS)
      .then((removed) => removed.length > 0 && log.info({ removed }, "removed stale OCI spec edits"))
      .catch((err: unknown) => log.warn({ err }, "could not sweep stale OCI spec edits"));
  }, (err: unknown) => log.warn({ err }, "could not ask dockerd for the OCI runtime layer to sweep what it left"));
  // Only a container Docker says is gone or stopped: a dockerd that does not answer may still run it (live-restore).
  const sweeper = new RootfsSweeper({
    layer: () => lookup.current({ quiet: true }),
    running: (id) => docker.inspectContainer(id).then((c) => c.State.Running, (err: unknown) => !isNotFound(err)),
    log,
  });
  sweeper.start();
  return sweeper;
}
