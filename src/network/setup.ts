/**
 * The pod network a start sets up from the flags: with --network-plugin=cni
 * the CNI plugins of the configuration directory, with no-op Docker's
 * default bridge.
 */
import type { Logger } from "../log.ts";
import { CniNetwork, type CniNetworkOptions } from "./cni.ts";
import { DockerBridgeNetwork, type PodNetwork } from "./plugin.ts";

/** The flags the pod network is set up from. */
export interface PodNetworkSettings {
  networkPlugin: string;
  cniConfDir: string;
  cniBinDirs: string[];
  cniCacheDir: string;
  podCidr: string;
}

/** --network-plugin=cni: CNI plugins from the conf dir; no-op: Docker's default bridge. */
export async function startPodNetwork(
  settings: PodNetworkSettings,
  log: Logger,
  savedPodCidr: string | undefined,
  onOperation?: CniNetworkOptions["onOperation"],
): Promise<PodNetwork> {
  // kubelet's CIDR from before a restart is newer than --pod-cidr, which stands in only until kubelet sends one.
  const podCidr = savedPodCidr ?? settings.podCidr;
  if (savedPodCidr) log.info({ podCidr: savedPodCidr }, "pod CIDR kubelet sent before this start");
  if (settings.networkPlugin !== "cni") {
    const network = new DockerBridgeNetwork();
    if (podCidr) network.setPodCidr(podCidr);
    return network;
  }
  const network = new CniNetwork({
    confDir: settings.cniConfDir,
    binDirs: settings.cniBinDirs,
    cacheDir: settings.cniCacheDir,
    podCidr,
    log,
    onOperation,
  });
  await network.start();
  return network;
}
