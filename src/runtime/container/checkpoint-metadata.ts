/**
 * config.dump and spec.dump of a checkpoint archive (checkpoint-archive.ts),
 * from what Docker says of the container. Field names are checkpointctl's
 * (lib/metadata.go ContainerConfig: a reduced copy of Podman's) and the OCI
 * runtime spec's; the annotations are those checkpointctl shows and CRI-O's
 * and containerd's restore code read.
 */
import type { ContainerInspect } from "../../docker/types.ts";
import { fromDockerLabels } from "../labels.ts";
import { parseName } from "../naming.ts";
import type { SandboxView } from "../sandbox/view.ts";
import { IMAGE_LABEL, NAME_LABEL } from "./convert.ts";

/** Go's zero time.Time, as encoding/json writes it (restoredTime of a container never restored). */
const GO_ZERO_TIME = "0001-01-01T00:00:00Z";

/** checkpointctl's metadata.ContainerConfig. */
export interface CheckpointConfigDump {
  id: string;
  name: string;
  rootfsImage?: string;
  rootfsImageRef?: string;
  rootfsImageName?: string;
  runtime?: string;
  createdTime: string;
  checkpointedTime: string;
  restoredTime: string;
  restored: boolean;
}

/** The pod and container a checkpoint belongs to, as the archive names them. */
export interface CheckpointIdentity {
  containerName: string;
  /** The image as the pod names it (CreateContainer's image). */
  image: string;
  /** One of the image's names in the engine (a repo tag), when it has one. */
  imageName: string;
  sandbox: Pick<SandboxView, "id" | "metadata">;
}

export function checkpointIdentity(c: ContainerInspect, sandbox: CheckpointIdentity["sandbox"], repoTags: readonly string[]): CheckpointIdentity {
  const labels = c.Config.Labels ?? {};
  const image = labels[IMAGE_LABEL] ?? c.Config.Image ?? c.Image;
  return {
    containerName: labels[NAME_LABEL] ?? parseName(c.Name)?.containerName ?? c.Name.replace(/^\//, ""),
    image,
    imageName: repoTags[0] ?? image,
    sandbox,
  };
}

export function configDump(c: ContainerInspect, who: CheckpointIdentity, checkpointedAt: Date): CheckpointConfigDump {
  return {
    id: c.Id,
    // The Docker name (k8s_<container>_<pod>_<namespace>_<uid>_<attempt>), as CRI-O names its containers.
    name: c.Name.replace(/^\//, ""),
    rootfsImage: who.image,
    rootfsImageRef: c.Image,
    rootfsImageName: who.imageName,
    runtime: c.HostConfig.Runtime || "runc",
    createdTime: c.Created,
    checkpointedTime: checkpointedAt.toISOString(),
    restoredTime: GO_ZERO_TIME,
    restored: false,
  };
}

/**
 * The annotations a CRI runtime puts in a container's spec: containerd's
 * (io.kubernetes.cri.*, which checkpointctl shows for any engine other than
 * Podman and CRI-O), the io.kubernetes.pod.* ones CRI-O writes, and the
 * container's CRI annotations, as both runtimes copy them.
 */
export function criAnnotations(c: ContainerInspect, who: CheckpointIdentity): Record<string, string> {
  const { metadata } = who.sandbox;
  return {
    ...fromDockerLabels(c.Config.Labels, false).annotations,
    "io.container.manager": "cridock",
    "io.kubernetes.cri.container-type": "container",
    "io.kubernetes.cri.container-name": who.containerName,
    "io.kubernetes.cri.sandbox-id": who.sandbox.id,
    "io.kubernetes.cri.sandbox-name": metadata.name,
    "io.kubernetes.cri.sandbox-namespace": metadata.namespace,
    "io.kubernetes.cri.sandbox-uid": metadata.uid,
    "io.kubernetes.cri.image-name": who.image,
    "io.kubernetes.container.name": who.containerName,
    "io.kubernetes.pod.name": metadata.name,
    "io.kubernetes.pod.namespace": metadata.namespace,
    "io.kubernetes.pod.uid": metadata.uid,
  };
}

/** An OCI runtime spec (only the part this code touches is typed). */
export interface OciSpec {
  ociVersion?: string;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/**
 * spec.dump: the spec Docker ran the container with (from containerd's
 * bundle, when cridock can read it) with the CRI annotations laid over its
 * own; otherwise one built from the inspect, holding what a reader of the
 * archive looks at (process, root, hostname, mounts, annotations).
 */
export function specDump(c: ContainerInspect, who: CheckpointIdentity, bundleSpec: OciSpec | undefined): OciSpec {
  const annotations = criAnnotations(c, who);
  if (bundleSpec) return { ...bundleSpec, annotations: { ...bundleSpec.annotations, ...annotations } };
  return {
    ociVersion: "1.0.2",
    process: {
      terminal: Boolean(c.Config.Tty),
      args: [c.Path, ...(c.Args ?? [])],
      env: c.Config.Env ?? [],
      cwd: c.Config.WorkingDir || "/",
    },
    root: { path: c.GraphDriver?.Data?.MergedDir ?? "", readonly: Boolean(c.HostConfig.ReadonlyRootfs) },
    hostname: c.Config.Hostname ?? "",
    mounts: (c.Mounts ?? []).map((m) => ({
      destination: m.Destination,
      type: m.Type === "tmpfs" ? "tmpfs" : "bind",
      source: m.Source,
      options: m.Type === "tmpfs" ? [] : ["rbind", m.RW === false ? "ro" : "rw"],
    })),
    annotations,
  };
}
