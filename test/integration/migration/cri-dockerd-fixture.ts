/**
 * A pod as cri-dockerd leaves it on a node, built without cri-dockerd:
 *  - the pause and workload containers created through the Docker API with
 *    cri-dockerd's names (k8s_POD_<pod>_<ns>_<uid>_<attempt>,
 *    k8s_<ctr>_<pod>_<ns>_<uid>_<attempt>) and labels (io.kubernetes.docker.type,
 *    io.kubernetes.sandbox.id, io.kubernetes.container.logpath, the pod
 *    labels kubelet sends), network mode "none" for the pause container and
 *    container:<pause> for the workload, as cri-dockerd does with CNI;
 *  - the pod network set up by running the CNI plugins directly, as
 *    cri-dockerd's libcni does: loopback, then the conflist's plugins with
 *    CNI_NETNS=/proc/<pause pid>/ns/net, CNI_ARGS IgnoreUnknown,
 *    K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID, and
 *    libcni's cache entry results/<network>-<id>-eth0 (optional);
 *  - cri-dockerd's checkpoint <root>/sandbox/<id>;
 *  - the container's CRI log path a symlink to Docker's json log.
 * The plugins are run with cridock's own exec helpers (they follow the CNI
 * spec, which is what libcni does too).
 */
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DockerClient } from "../../../src/docker/client.ts";
import { loadNetworkConfig, findPlugin } from "../../../src/network/conf.ts";
import { execPlugin, pluginEnv, pluginStdin, type InvocationArgs } from "../../../src/network/invoke.ts";
import { formatCriDockerdCheckpoint } from "../../../src/store/cri-dockerd-checkpoint.ts";
import { BUSYBOX_IMAGE, CNI_BIN_DIR, PAUSE_IMAGE, type CniConfDir } from "../../helpers/env.ts";

export interface FixturePod {
  name: string;
  namespace: string;
  uid: string;
  sandboxId: string;
  containerId: string;
  /** The IP the CNI plugins gave the pod. */
  ip: string;
  logDirectory: string;
  logPath: string;
  dockerLogPath: string;
}

export interface FixtureOptions {
  docker: DockerClient;
  cni: CniConfDir;
  /** --cni-cache-dir of the cridock under test (where libcni's entry goes). */
  cniCacheDir: string;
  criDockerdRoot: string;
  logRoot: string;
  name: string;
  /** Write libcni's cache entry (cri-dockerd always has one; false tests the fallback). */
  libcniCache: boolean;
  /** The workload's shell command. */
  command: string;
}

export async function makeCriDockerdPod(o: FixtureOptions): Promise<FixturePod> {
  const namespace = "cridock-migration";
  const uid = `uid-${process.pid}-${o.name}`;
  const podLabels = {
    "io.kubernetes.pod.name": o.name,
    "io.kubernetes.pod.namespace": namespace,
    "io.kubernetes.pod.uid": uid,
  };
  const pause = await o.docker.createContainer(`k8s_POD_${o.name}_${namespace}_${uid}_0`, {
    Image: PAUSE_IMAGE,
    Hostname: o.name,
    Labels: {
      ...podLabels,
      app: "legacy",
      "annotation.kubernetes.io/config.source": "api",
      "io.kubernetes.container.name": "POD",
      "io.kubernetes.docker.type": "podsandbox",
    },
    HostConfig: { NetworkMode: "none", IpcMode: "shareable", LogConfig: { Type: "json-file", Config: {} } },
  } as never);
  const sandboxId = pause.Id;
  await o.docker.startContainer(sandboxId);
  const pid = (await o.docker.inspectContainer(sandboxId)).State.Pid;

  // CNI ADD as libcni does it for cri-dockerd.
  const { config } = await loadNetworkConfig(o.cni.dir, [CNI_BIN_DIR]);
  if (!config) throw new Error(`no CNI config in ${o.cni.dir}`);
  const cniArgs: [string, string][] = [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", namespace],
    ["K8S_POD_NAME", o.name],
    ["K8S_POD_INFRA_CONTAINER_ID", sandboxId],
  ];
  const netns = `/proc/${pid}/ns/net`;
  const base: InvocationArgs = { containerId: sandboxId, netnsPath: netns, ifName: "eth0", args: cniArgs, binDirs: [CNI_BIN_DIR] };
  const loopback = { type: "loopback", raw: { type: "loopback" } };
  await execPlugin("loopback ADD", {
    binary: (await findPlugin("loopback", [CNI_BIN_DIR]))!,
    env: pluginEnv("ADD", { ...base, ifName: "lo" }),
    stdin: JSON.stringify(pluginStdin({ name: "cni-loopback", cniVersion: "1.0.0" }, loopback, {}, undefined)),
    timeoutMs: 30_000,
  });
  let prev: unknown;
  for (const plugin of config.plugins) {
    const out = await execPlugin(`${plugin.type} ADD`, {
      binary: (await findPlugin(plugin.type, [CNI_BIN_DIR]))!,
      env: pluginEnv("ADD", base),
      stdin: JSON.stringify(pluginStdin(config, plugin, {}, prev)),
      timeoutMs: 30_000,
    });
    prev = JSON.parse(out);
  }
  const ip = String((prev as { ips: { address: string }[] }).ips[0]!.address).split("/")[0]!;
  if (o.libcniCache) {
    await mkdir(join(o.cniCacheDir, "results"), { recursive: true });
    await writeFile(
      join(o.cniCacheDir, "results", `${config.name}-${sandboxId}-eth0`),
      JSON.stringify({
        kind: "cniCacheV1",
        containerId: sandboxId,
        config: Buffer.from(config.bytes).toString("base64"),
        ifName: "eth0",
        networkName: config.name,
        netns,
        cniArgs,
        result: prev,
      }),
    );
  }

  const logDirectory = join(o.logRoot, `${namespace}_${o.name}_${uid}`);
  const logPath = join(logDirectory, "app", "0.log");
  const ctr = await o.docker.createContainer(`k8s_app_${o.name}_${namespace}_${uid}_0`, {
    Image: BUSYBOX_IMAGE,
    Cmd: ["sh", "-c", o.command],
    Labels: {
      ...podLabels,
      "io.kubernetes.container.name": "app",
      "io.kubernetes.docker.type": "container",
      "io.kubernetes.sandbox.id": sandboxId,
      "io.kubernetes.container.logpath": logPath,
      "annotation.io.kubernetes.container.restartCount": "0",
    },
    HostConfig: {
      NetworkMode: `container:${sandboxId}`,
      IpcMode: `container:${sandboxId}`,
      PidMode: "",
      LogConfig: { Type: "json-file", Config: {} },
    },
  } as never);
  await o.docker.startContainer(ctr.Id);
  const dockerLogPath = (await o.docker.inspectContainer(ctr.Id)).LogPath;
  await mkdir(join(logDirectory, "app"), { recursive: true });
  await symlink(dockerLogPath, logPath);

  await mkdir(join(o.criDockerdRoot, "sandbox"), { recursive: true });
  await writeFile(join(o.criDockerdRoot, "sandbox", sandboxId), formatCriDockerdCheckpoint(o.name, namespace, undefined, false));
  return { name: o.name, namespace, uid, sandboxId, containerId: ctr.Id, ip, logDirectory, logPath, dockerLogPath };
}
