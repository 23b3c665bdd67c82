/**
 * Whether dockerd has cridock's OCI runtime layer, as the server and
 * `cridock check` see it: the runtime name registered in daemon.json
 * (registration.ts), as dockerd reports it in /info, whose path is a
 * launcher cridock wrote (launcher.ts) and whose real runtime exists.
 */
import { access, constants, readFile } from "node:fs/promises";
import type { DockerInfo } from "../docker/types.ts";
import { isCommandName, parseLauncher } from "./launcher.ts";

/** The name the layer is registered under in daemon.json's `runtimes`. */
export const LAYER_RUNTIME = "cridock";
/** What `cridock oci-layer install` does, for messages that tell the operator how. */
export const LAYER_INSTALL_HINT = "run `cridock oci-layer install` (the .deb's postinst does) to register it";

export interface OciLayer {
  /** The runtime name containers are created with (HostConfig.Runtime). */
  runtime: string;
  launcher: string;
  delegate: string;
  editsDir: string;
  /** Where the layer makes idmapped rootfs for pods' user namespaces; absent in a launcher from before them. */
  rootfsDir?: string;
}

export type LayerState = { ready: true; layer: OciLayer } | { ready: false; reason: string };

export async function inspectLayer(info: Pick<DockerInfo, "Runtimes">, name = LAYER_RUNTIME): Promise<LayerState> {
  const entry = info.Runtimes?.[name];
  if (!entry) return { ready: false, reason: `dockerd has no runtime named "${name}": ${LAYER_INSTALL_HINT}` };
  const launcher = entry.path ?? "";
  if (!launcher.startsWith("/")) return { ready: false, reason: `dockerd's runtime "${name}" is "${launcher}", not the path of cridock's launcher` };
  let text: string;
  try {
    text = await readFile(launcher, "utf8");
  } catch (err) {
    return { ready: false, reason: `dockerd's runtime "${name}" names ${launcher}, which cannot be read: ${(err as Error).message}` };
  }
  const settings = parseLauncher(text);
  if (!settings) return { ready: false, reason: `dockerd's runtime "${name}" names ${launcher}, which is not a launcher cridock wrote` };
  // A bare name is found on the PATH of containerd's shim at each call, as
  // Docker's own runc is: not this process's to check (launcher.ts).
  if (!isCommandName(settings.delegate)) {
    try {
      await access(settings.delegate, constants.X_OK);
    } catch {
      return { ready: false, reason: `the layer's real runtime ${settings.delegate} is not an executable file: ${LAYER_INSTALL_HINT} again` };
    }
  }
  return { ready: true, layer: { runtime: name, launcher, ...settings } };
}

/** How long a found layer, or its absence, is trusted before dockerd is asked again. */
const READY_TTL_MS = 60_000;
const ABSENT_TTL_MS = 15_000;

/**
 * The server's view of the layer, asked on CreateContainer and
 * StartContainer of containers that need it: cached, so that a node without
 * it pays one /info every 15 s, and one that gains it (the .deb's postinst
 * registers it while cridock runs) uses it from then on. Its absence is
 * logged once, as what the node then lacks.
 *
 * Each time dockerd is asked and the layer is not ready, `onNotReady` hears
 * why (quiet or not): the server's re-registration (layer-reregister.ts)
 * decides from there, rate-limited on its side. `forget` drops what is
 * cached, for when dockerd restarted (it may have read a daemon.json that a
 * tool rewrote without the layer) and the next call must ask it again.
 */
export class OciLayerLookup {
  private cached?: { state: LayerState; at: number };
  private pending?: Promise<LayerState>;
  private toldAbsent = false;

  constructor(
    private readonly info: () => Promise<Pick<DockerInfo, "Runtimes">>,
    private readonly onAbsent: (reason: string) => void,
    private readonly onNotReady?: (reason: string) => void,
  ) {}

  /** Drops the cached answer: the next `current` asks dockerd. */
  forget(): void {
    this.cached = undefined;
  }

  /** The layer, or undefined; `quiet` when the caller does not need it (a cgroup v1 node's start-up sweep). */
  async current(options: { quiet?: boolean } = {}): Promise<OciLayer | undefined> {
    const state = await this.state(options);
    return state.ready ? state.layer : undefined;
  }

  /** The layer, or why the node lacks it (for the messages of what needs it: bind mount options). */
  async state(options: { quiet?: boolean } = {}): Promise<LayerState> {
    const now = Date.now();
    const c = this.cached;
    if (c && now - c.at < (c.state.ready ? READY_TTL_MS : ABSENT_TTL_MS)) return c.state;
    this.pending ??= this.info()
      .then((info) => inspectLayer(info))
      .finally(() => (this.pending = undefined));
    const state = await this.pending;
    this.cached = { state, at: Date.now() };
    if (!state.ready && !this.toldAbsent && !options.quiet) {
      this.toldAbsent = true;
      this.onAbsent(state.reason);
    }
    if (state.ready) this.toldAbsent = false;
    else this.onNotReady?.(state.reason);
    return state;
  }
}
