/**
 * A standalone kubelet on the cgroup v2 test node (test/helpers/vm-node.ts),
 * as the VM files that run static pods share it: its configuration, its
 * systemd unit, the images its pods run, and their manifests.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CRICTL, KUBERNETES_BIN_DIR, REGISTRY } from "./env.ts";
import { ensureDebInstalled, loadImage, writeImageArchive, writePauseArchive, type VmNode } from "./vm-node.ts";
import { busyboxEntries, userlandEntries } from "../../scripts/env/images/rootfs.ts";

/** The kubelet scripts/env/install-kubernetes.sh builds on the host (the pinned KUBERNETES_VERSION). */
export const KUBELET = join(KUBERNETES_BIN_DIR, "kubelet");
/** A small busybox (sh, sleep, dd, mkfifo) for the pods' containers. */
export const BUSYBOX = `${REGISTRY}/cridock-test/busybox-vm:1`;
export const NODE_NAME = "cridock-vm";
export const MANIFESTS = "/etc/kubernetes/manifests";
export const KUBELET_CONFIG = "/etc/kubernetes/kubelet-config.json";
export const READ_ONLY_PORT = 10255;
const KUBELET_UNIT = "/etc/systemd/system/kubelet.service";

/** The two docker-load tarballs (pause, busybox), in DIR. */
export async function buildKubeletImages(dir: string): Promise<string[]> {
  const archives = [join(dir, "pause.tar"), join(dir, "busybox.tar")];
  await writePauseArchive(archives[0]!);
  await writeImageArchive(archives[1]!, [...busyboxEntries(["sh", "sleep", "dd", "mkfifo"]), ...userlandEntries()], { Cmd: ["sh"], Env: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] }, [BUSYBOX]);
  return archives;
}

/** The node ready for kubelet: the .deb installed, the images loaded, kubelet and crictl copied in. Each step's seconds. */
export async function prepareKubeletNode(vm: VmNode, deb: string, images: string[]): Promise<{ deb: number; images: number; kubelet: number }> {
  let since = Date.now();
  const took = () => {
    const s = Math.round((Date.now() - since) / 1000);
    since = Date.now();
    return s;
  };
  await ensureDebInstalled(vm, deb);
  const debSeconds = took();
  for (const archive of images) await loadImage(vm, archive);
  const imageSeconds = took();
  await vm.copy(KUBELET, "/usr/local/bin/kubelet", 900_000);
  // The files that need crictl skip their steps without it (it is the tests' build, not the node's).
  if (existsSync(CRICTL)) await vm.copy(CRICTL, "/usr/local/bin/crictl");
  return { deb: debSeconds, images: imageSeconds, kubelet: took() };
}

/**
 * kubelet's defaults with the systemd driver, besides what a standalone
 * kubelet needs, and:
 * - swap left on (failSwapOn false), with its default behaviour, NoSwap;
 * - PodAndContainerStatsFromCRI (alpha): pod and container stats, PSI
 *   included, from cridock's ListPodSandboxStats rather than cAdvisor;
 * - the read-only port on the guest's loopback, for /stats/summary with
 *   busybox's wget;
 * - MemoryQoS (beta and on by default since 1.37) with the tiered
 *   reservation policy and a throttling factor of 0.9: kubelet then sends
 *   memory.min (Guaranteed) or memory.low (Burstable) at the memory request
 *   and memory.high between the request and the limit, in `unified`;
 * - VolumeBindMountOptions (alpha in 1.37, KEP-5855): kubelet passes a
 *   volumeMount's `bindMountOptions` in Mount.mount_options, and declares
 *   the node feature of that name where the runtime's Status says
 *   `mount_options` when kubelet starts (cridock: where its OCI layer is
 *   registered). A pod that asks for options is refused on a node that does
 *   not declare it, gate on or off: kubelet's static pod path keeps the
 *   field either way.
 */
export function kubeletConfig(): Record<string, unknown> {
  return {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    cgroupDriver: "systemd",
    containerRuntimeEndpoint: "unix:///var/run/cridock.sock",
    staticPodPath: MANIFESTS,
    // Standalone: no API server to authenticate against; the API on the guest's loopback only.
    address: "127.0.0.1",
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: "AlwaysAllow" },
    readOnlyPort: READ_ONLY_PORT,
    failSwapOn: false,
    memorySwap: { swapBehavior: "NoSwap" },
    featureGates: { PodAndContainerStatsFromCRI: true, VolumeBindMountOptions: true },
    memoryReservationPolicy: "TieredReservation",
    memoryThrottlingFactor: 0.9,
  };
}

const kubeletCommand = `/usr/local/bin/kubelet --config=${KUBELET_CONFIG} --hostname-override=${NODE_NAME} --v=2`;

async function writeKubeletConfig(vm: VmNode, config: Record<string, unknown>): Promise<void> {
  await vm.run(`mkdir -p ${MANIFESTS} && cat >${KUBELET_CONFIG}`, { input: JSON.stringify(config, null, 2) });
}

/** kubelet as a transient systemd unit, with CONFIG written first (a unit stopped before is gone). */
export async function startKubelet(vm: VmNode, config: Record<string, unknown>): Promise<void> {
  await writeKubeletConfig(vm, config);
  await vm.run(`systemd-run --unit=kubelet --description="kubelet (cridock VM test)" ${kubeletCommand}`);
}

/**
 * kubelet as a unit file of /etc/systemd/system, enabled and started: it
 * starts at every boot, after Docker and cridock's socket, as kubeadm's
 * kubelet.service does. removeKubeletUnit undoes it.
 */
export async function enableKubelet(vm: VmNode, config: Record<string, unknown>): Promise<void> {
  await writeKubeletConfig(vm, config);
  const unit = [
    "[Unit]",
    "Description=kubelet (cridock VM test)",
    "Wants=network-online.target",
    "After=network-online.target docker.service cridock.socket",
    "[Service]",
    `ExecStart=${kubeletCommand}`,
    "Restart=always",
    "RestartSec=5",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");
  await vm.run(`cat >${KUBELET_UNIT} && systemctl daemon-reload && systemctl enable --now kubelet.service 2>&1`, { input: unit, timeoutMs: 300_000 });
}

/** Stops and removes the unit enableKubelet wrote. */
export async function removeKubeletUnit(vm: VmNode): Promise<void> {
  await vm.ssh(`systemctl disable --now kubelet.service; rm -f ${KUBELET_UNIT}; systemctl daemon-reload`, { timeoutMs: 300_000 });
}

/** A static pod of busybox containers (`imagePullPolicy: Never`: the guest pulls nothing). */
export function podManifest(name: string, ...containers: Record<string, unknown>[]): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: { terminationGracePeriodSeconds: 5, containers: containers.map((c) => ({ image: BUSYBOX, imagePullPolicy: "Never", ...c })) },
  };
}

/** The manifest with `fields` added to its pod spec (restartPolicy, hostUsers, volumes). */
export function withSpec(manifest: Record<string, unknown>, fields: Record<string, unknown>): Record<string, unknown> {
  return { ...manifest, spec: { ...(manifest.spec as Record<string, unknown>), ...fields } };
}
