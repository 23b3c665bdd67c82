/** Version, Status, RuntimeConfig, UpdateRuntimeConfig. */
import type { HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { CgroupDriver } from "./proto-types.ts";
import { RUNTIME_NAME, type RuntimeStatus } from "../runtime/status.ts";
import { internal, invalidArgument } from "../errors.ts";

/** kubelet refuses any other value (kuberuntime_manager.go getTypedVersion). */
export const CRI_VERSION = "0.1.0";
export const CRI_API_VERSION = "v1";

export interface RuntimeInfoDeps {
  status: RuntimeStatus;
  /** Extra verbose-Status entries (the effective config, for `crictl info`). */
  verboseInfo: () => Record<string, unknown>;
  /** Why the runtime is not ready while its start still reconciles with dockerd (cri/startup-gate.ts). */
  starting?: () => { reason: string; message: string } | undefined;
}

/**
 * Status(verbose).info["config"]: the effective flags, and the pause image
 * under `sandboxImage`, the key containerd's CRI plugin uses and kubeadm
 * reads (it warns when the runtime's differs from the one it expects).
 */
export function configInfo<C extends { podInfraContainerImage: string }>(config: C): C & { sandboxImage: string } {
  return { ...config, sandboxImage: config.podInfraContainerImage };
}

export function runtimeInfoRpcs({ status, verboseInfo, starting }: RuntimeInfoDeps): HandlerTable {
  return {
    async Version(): Promise<cri.VersionResponse> {
      return {
        version: CRI_VERSION,
        runtimeName: RUNTIME_NAME,
        runtimeVersion: await status.runtimeVersion(),
        runtimeApiVersion: CRI_API_VERSION,
      };
    },

    async Status(request: cri.StatusRequest): Promise<cri.StatusResponse> {
      const conditions = await status.conditions();
      // Until the start's reconciliation is through, pods cannot be served whatever dockerd says.
      const pending = starting?.();
      if (pending) {
        for (const c of conditions) if (c.type === "RuntimeReady" && c.status) Object.assign(c, { status: false, ...pending });
      }
      const runtimeReady = conditions.find((c) => c.type === "RuntimeReady")?.status ?? false;
      const [handlers, features] = await Promise.all([
        runtimeReady ? status.runtimeHandlers().catch(() => []) : [],
        status.runtimeFeatures(),
      ]);
      const info: Record<string, string> = {};
      if (request.verbose) {
        for (const [key, value] of Object.entries(verboseInfo())) info[key] = JSON.stringify(value);
      }
      return {
        status: { conditions },
        info,
        runtimeHandlers: handlers.map((h) => ({
          name: h.name,
          features: { recursiveReadOnlyMounts: h.recursiveReadOnlyMounts, userNamespaces: h.userNamespaces },
        })),
        // Strict is carried out on every engine (numeric user:group, GroupAdd; see container/strict-user.ts).
        // A pod in its own user namespace cannot have the host's network (runtime/sandbox/spec.ts).
        // Bind mount options only where the OCI runtime layer is (runtime/status.ts).
        features: { supplementalGroupsPolicy: true, userNamespacesHostNetwork: false, mountOptions: features.mountOptions },
      };
    },

    async RuntimeConfig(): Promise<cri.RuntimeConfigResponse> {
      const driver = await status.cgroupDriver();
      return { linux: { cgroupDriver: driver === "systemd" ? CgroupDriver.SYSTEMD : CgroupDriver.CGROUPFS } };
    },

    async UpdateRuntimeConfig(request: cri.UpdateRuntimeConfigRequest): Promise<cri.UpdateRuntimeConfigResponse> {
      const cidr = request.runtimeConfig?.networkConfig?.podCidr ?? "";
      if (cidr) {
        for (const part of cidr.split(",")) {
          if (!/^[0-9a-fA-F.:]+\/\d{1,3}$/.test(part.trim())) {
            throw invalidArgument(`pod CIDR "${part}" is not a CIDR`);
          }
        }
        try {
          await status.setPodCidr(cidr);
        } catch (err) {
          throw internal(`keeping pod CIDR ${cidr} for the next start`, err);
        }
      }
      return {};
    },
  };
}
