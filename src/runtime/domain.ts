/**
 * The runtime domain as a start builds it: the runtime's status, images,
 * sandboxes and containers over one Docker client and one pod network, with
 * the OCI runtime layer's view and the CRI log writers they share; then the
 * views kubelet polls or streams (container events, stats, pod metrics).
 * Construction only: what the last run left is reconciled by reconcile.ts.
 */
import { join } from "node:path";
import type { DockerClient } from "../docker/client.ts";
import type { Logger } from "../log.ts";
import { LogFollowers } from "../logs/followers.ts";
import type { PodNetwork } from "../network/plugin.ts";
import type { LayerReregistrar } from "../oci/layer-reregister.ts";
import { ociLayerView, sweepOciLeftovers } from "../oci/setup.ts";
import { StatsCollector } from "../stats/collector.ts";
import { CheckpointStore } from "../store/checkpoint.ts";
import type { PodCidrStore } from "../store/pod-cidr.ts";
import { PodEventFeed } from "./container-events.ts";
import { ContainerManager } from "./container/manager.ts";
import { loadOomScorePolicy, type OomScoreRestriction } from "./container/oom-score.ts";
import type { ContainerInfo } from "./container/spec.ts";
import { DockerImageFiles } from "./image-files.ts";
import { ImageFilesystem } from "./image/imagefs.ts";
import { ImageManager, type ImageManagerOptions } from "./image/manager.ts";
import { PodMetricsService } from "./pod-metrics.ts";
import { PodCheckpointer } from "./pod-checkpoint/checkpoint.ts";
import { PodRestorer } from "./pod-checkpoint/restore.ts";
import { SandboxManager } from "./sandbox/manager.ts";
import type { SandboxRecord } from "./sandbox/record.ts";
import { StatsService } from "./stats.ts";
import { RuntimeStatus } from "./status.ts";

/** The flags the domain is built from. */
export interface RuntimeSettings {
  podInfraContainerImage: string;
  imagePullProgressDeadlineMs: number;
  rootDirectory: string;
  dockerLogMaxSize: string;
  dockerLogMaxFile: number;
  runtimeRequestTimeoutMs: number;
  restrictOomScoreAdj: OomScoreRestriction;
  ociLayerReregister: boolean;
}

export interface RuntimeParts {
  settings: RuntimeSettings;
  log: Logger;
  docker: DockerClient;
  network: PodNetwork;
  /** Where kubelet's pod CIDR is kept across restarts. */
  podCidrs: PodCidrStore;
  onPull?: ImageManagerOptions["onPull"];
}

export interface RuntimeDomain {
  status: RuntimeStatus;
  imageFs: ImageFilesystem;
  images: ImageManager;
  logFollowers: LogFollowers;
  sandboxStore: CheckpointStore<SandboxRecord>;
  imageFiles: DockerImageFiles;
  sandboxes: SandboxManager;
  containers: ContainerManager;
  /** CheckpointPod and RestorePod (KEP-5823), over the sandboxes and containers. */
  podCheckpoints: { checkpointer: PodCheckpointer; restorer: PodRestorer };
  /** The OCI layer's periodic sweep of idmapped rootfs left behind; stopped with cridock. */
  rootfsSweeper: { stop(): void };
  /** Registers the OCI layer again after a tool removed it from daemon.json (absent when turned off); stopped with cridock. */
  ociLayerReregistrar?: LayerReregistrar;
}

export async function createRuntimeDomain({ settings, log, docker, network, podCidrs, onPull }: RuntimeParts): Promise<RuntimeDomain> {
  const oomScore = await loadOomScorePolicy(settings.restrictOomScoreAdj, log);
  const { layer: ociLayer, userns, mountOptions, reregistrar } = ociLayerView(docker, log, settings);
  const status = new RuntimeStatus(docker, network, (cidr) => podCidrs.save(cidr), () => userns.current(), mountOptions);
  status.prefetchOnConnect();
  const imageFs = new ImageFilesystem(docker);
  const images = new ImageManager({
    docker,
    log,
    pauseImage: settings.podInfraContainerImage,
    pullProgressDeadlineMs: settings.imagePullProgressDeadlineMs,
    onPull,
  });

  const logFollowers = new LogFollowers(docker, settings.rootDirectory, log);
  const sandboxStore = new CheckpointStore<SandboxRecord>(join(settings.rootDirectory, "sandbox"));
  const imageFiles = new DockerImageFiles(docker, log);
  const sandboxes = new SandboxManager({
    docker,
    network,
    store: sandboxStore,
    log,
    pauseImage: settings.podInfraContainerImage,
    ensureImage: (ref, signal) => images.ensureImage(ref, { signal }),
    files: imageFiles,
    rootDirectory: settings.rootDirectory,
    logMaxSize: settings.dockerLogMaxSize,
    logMaxFile: settings.dockerLogMaxFile,
    oomScore,
    cgroupDriver: () => status.cgroupDriver(),
    runtimeNames: async () => Object.keys((await docker.info()).Runtimes ?? {}),
    containerRemoved: (id) => logFollowers.forget(id),
    userns: () => userns.current(),
  });
  const rootfsSweeper = sweepOciLeftovers(ociLayer, docker, log);
  const containers = new ContainerManager({
    docker,
    sandboxes,
    images,
    files: imageFiles,
    logs: logFollowers,
    log,
    logMaxSize: settings.dockerLogMaxSize,
    logMaxFile: settings.dockerLogMaxFile,
    oomScore,
    rootDirectory: settings.rootDirectory,
    cgroupDriver: () => status.cgroupDriver(),
    requestTimeoutMs: settings.runtimeRequestTimeoutMs,
    ociLayer: () => ociLayer.current(),
    userns: () => userns.current(),
    mountOptions,
  });
  const podCheckpoints = {
    checkpointer: new PodCheckpointer({ docker, sandboxes, containers, log, rootDirectory: settings.rootDirectory }),
    restorer: new PodRestorer({ docker, sandboxes, containers, log, rootDirectory: settings.rootDirectory }),
  };
  return { status, imageFs, images, logFollowers, sandboxStore, imageFiles, sandboxes, containers, podCheckpoints, rootfsSweeper, ociLayerReregistrar: reregistrar };
}

/** What kubelet polls or streams about pods, over the domain. */
export interface PodViews {
  containerEvents: PodEventFeed;
  /** A sandbox's containers' statuses, asked for only while someone streams container events. */
  sandboxContainers: { wanted: () => boolean; statuses: (sandboxId: string) => Promise<ContainerInfo[]> };
  stats: StatsService;
  podMetrics: PodMetricsService;
}

export function createPodViews({ sandboxes, containers }: RuntimeDomain, docker: DockerClient, log: Logger): PodViews {
  const containerStatuses = async (sandboxId: string): Promise<ContainerInfo[]> => {
    const listed = await containers.list({ id: "", sandboxId, labelSelector: {} });
    const statuses = await Promise.all(listed.map((c) => containers.status(c.id).catch(() => undefined)));
    return statuses.filter((s): s is ContainerInfo => s !== undefined);
  };
  const containerEvents = new PodEventFeed({
    events: docker.events,
    sandboxStatus: (id) => sandboxes.status(id),
    containerStatuses,
    log,
  });
  const sandboxContainers = { wanted: () => containerEvents.subscriberCount > 0, statuses: containerStatuses };

  const stats = new StatsService(docker, new StatsCollector(), log.child({ component: "stats" }));
  const podMetrics = new PodMetricsService(stats, docker, log.child({ component: "pod-metrics" }));
  return { containerEvents, sandboxContainers, stats, podMetrics };
}
