/**
 * CheckpointPod and RestorePod (cri-api v0.37, KEP-5823): a whole pod
 * checkpointed at one consistent cut and restored as a new sandbox with its
 * containers CREATED. Not carried out yet: both answer UNIMPLEMENTED saying
 * so, which is what a caller must see instead of a checkpoint that is not
 * one. kubelet 1.37 does not call them; single containers are checkpointed
 * and restored with CheckpointContainer and CreateContainer
 * (runtime/container/checkpoint*.ts).
 */
import type { HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import { unimplemented } from "../errors.ts";

const NOT_YET =
  "cridock does not checkpoint or restore whole pods yet; single containers are checkpointed with CheckpointContainer " +
  "(kubelet's checkpoint API) and restored by creating a container from the archive";

export function podCheckpointRpcs(): HandlerTable {
  return {
    async CheckpointPod(_request: cri.CheckpointPodRequest): Promise<cri.CheckpointPodResponse> {
      throw unimplemented(`CheckpointPod: ${NOT_YET}`);
    },

    async RestorePod(_request: cri.RestorePodRequest): Promise<cri.RestorePodResponse> {
      throw unimplemented(`RestorePod: ${NOT_YET}`);
    },
  };
}
