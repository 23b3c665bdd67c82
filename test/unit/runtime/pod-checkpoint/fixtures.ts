/** A sandbox and containers as cridock records them, for the pod checkpoint's unit tests. */
import type { ManifestContainerSpec } from "../../../../src/runtime/pod-checkpoint/manifest.ts";
import type { SandboxSpec } from "../../../../src/runtime/sandbox/spec.ts";

export function sandboxSpec(): SandboxSpec {
  return {
    metadata: { name: "web", namespace: "default", uid: "uid-1", attempt: 0 },
    hostname: "web",
    logDirectory: "/var/log/pods/default_web_uid-1",
    portMappings: [{ protocol: "tcp", containerPort: 80, hostPort: 0, hostIp: "" }],
    labels: { app: "web" },
    annotations: { note: "x" },
    cgroupParent: "",
    sysctls: {},
    namespaces: { network: "pod", pid: "container", ipc: "pod", targetId: "" },
    security: { privileged: false, readonlyRootfs: false, supplementalGroups: [], seccomp: { type: "unconfined" } },
    runtimeHandler: "",
  };
}

export function containerSpec(name: string): ManifestContainerSpec {
  return {
    name,
    attempt: 0,
    image: "busybox:1.36",
    userImage: "busybox:1.36",
    command: ["sh", "-c"],
    args: ["count"],
    workingDir: "",
    envs: [{ key: "PATH", value: "/bin" }],
    mounts: [
      {
        containerPath: "/data",
        hostPath: "/var/lib/kubelet/pods/uid-1/volumes/data",
        readonly: false,
        selinuxRelabel: false,
        propagation: "private",
        recursiveReadOnly: false,
        image: "",
        imageSubPath: "",
      },
    ],
    devices: [],
    cdiDevices: [],
    labels: { "io.kubernetes.container.name": name },
    annotations: {},
    logPath: `${name}/0.log`,
    stdin: false,
    stdinOnce: false,
    tty: false,
    stopSignal: "",
  };
}
