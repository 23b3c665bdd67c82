/**
 * CNI ADD/DEL metrics as a decorator around a PodNetwork: setUp is ADD,
 * tearDown is DEL (each the whole plugin list). network/ stays unaware of
 * metrics; the sandbox code gets this wrapper in its place.
 */
import type { NetworkReadiness, PodNetwork, PodNetworkAttachment, PodNetworkRequest } from "../network/plugin.ts";

export interface CniObserver {
  cniOperation(operation: "ADD" | "DEL", seconds: number, ok: boolean): void;
}

export function instrumentNetwork(network: PodNetwork, observer: CniObserver): PodNetwork {
  // Docker's own bridge runs no CNI operation.
  if (network.kind !== "cni") return network;
  const timed = async <T>(operation: "ADD" | "DEL", run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      const result = await run();
      observer.cniOperation(operation, (performance.now() - started) / 1000, true);
      return result;
    } catch (err) {
      observer.cniOperation(operation, (performance.now() - started) / 1000, false);
      throw err;
    }
  };
  return {
    kind: network.kind,
    readiness: (): NetworkReadiness => network.readiness(),
    setPodCidr: (cidr: string) => network.setPodCidr(cidr),
    setUp: (request: PodNetworkRequest, signal?: AbortSignal): Promise<PodNetworkAttachment> =>
      timed("ADD", () => network.setUp(request, signal)),
    tearDown: (request: PodNetworkRequest) => timed("DEL", () => network.tearDown(request)),
    close: () => network.close(),
  };
}
