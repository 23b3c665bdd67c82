/**
 * CheckpointPod and RestorePod (cri-api v0.37, KEP-5823): a whole pod
 * checkpointed at one consistent cut into one archive, and restored as a
 * new sandbox with its containers CREATED (StartContainer then restores
 * each one's processes). Protobuf shapes ⇄ runtime/pod-checkpoint/; the
 * call's deadline reaches the runtime as ctx.signal.
 */
import type { CallContext, HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { invalidArgument } from "../errors.ts";
import { specFromCri } from "./container-rpcs.ts";
import { sandboxSpecFromCri } from "./sandbox-rpcs.ts";
import type { PodCheckpointer } from "../runtime/pod-checkpoint/checkpoint.ts";
import type { PodRestorer } from "../runtime/pod-checkpoint/restore.ts";

export interface PodCheckpointRpcDeps {
  podCheckpoints: { checkpointer: PodCheckpointer; restorer: PodRestorer };
}

export function podCheckpointRpcs({ podCheckpoints }: PodCheckpointRpcDeps): HandlerTable {
  return {
    async CheckpointPod(request: cri.CheckpointPodRequest, ctx: CallContext): Promise<cri.CheckpointPodResponse> {
      await podCheckpoints.checkpointer.checkpoint(
        {
          sandboxId: request.podSandboxId ?? "",
          outputPath: request.outputPath ?? "",
          containerIds: [...(request.containerIds ?? [])],
          options: { ...(request.options ?? {}) },
        },
        ctx.signal,
      );
      return {};
    },

    async RestorePod(request: cri.RestorePodRequest, ctx: CallContext): Promise<cri.RestorePodResponse> {
      const runtimeHandler = request.runtimeHandler ?? "";
      const containers = (request.containerConfigs ?? []).map((config, i) => {
        if (!config.metadata?.name) throw invalidArgument(`container_configs[${i}] has no metadata.name: it names the checkpointed container it configures`);
        // The image is the checkpoint's: a config's own image is not asked for.
        return specFromCri({ ...config, image: { ...(config.image ?? {}), image: config.image?.image || "checkpoint" } });
      });
      const result = await podCheckpoints.restorer.restore(
        {
          checkpointPath: request.checkpointPath ?? "",
          sandbox: request.config ? sandboxSpecFromCri({ config: request.config, runtimeHandler }) : undefined,
          runtimeHandler,
          options: { ...(request.options ?? {}) },
          containers,
        },
        ctx.signal,
      );
      return { podSandboxId: result.sandboxId, restoredContainers: result.containers.map((c) => ({ name: c.name, containerId: c.id })) };
    },
  };
}
