/**
 * Image volumes (CRI Mount.image and image_sub_path) → Docker's image
 * mounts: `Mount{Type:"image", Source:<image id>, Target, ReadOnly,
 * ImageOptions:{Subpath}}`, which exist from Engine API 1.48 (Docker 28.0)
 * on. dockerd gives each mount its own layer over the image (so one image
 * may be mounted at two places) and releases it when the container is
 * removed.
 *
 * On an older engine the request is refused: a runtime that dropped the
 * field would hand the pod an empty directory without a word. The image
 * must be present (kubelet pulls it first); a sub-path is checked at create
 * time, since dockerd would only notice it at start.
 *
 * An image volume is read-only (KEP-4639; kubelet always asks so), and a
 * request that says otherwise is refused rather than quietly mounted
 * read-only: the caller asked for something else than it will get.
 * ContainerStatus reports the image id mounted (Mount.image.image_ref),
 * read back from the container's HostConfig.Mounts (imageRefOfMount).
 */
import { compareApiVersions } from "../../docker/api-version.ts";
import type { DockerMount } from "../../docker/types.ts";
import { type CridockError, failedPrecondition, invalidArgument, unimplemented } from "../../errors.ts";
import { checkPath } from "./mounts.ts";
import type { MountSpec } from "./spec.ts";

/** The Engine API version from which Docker mounts images. */
export const IMAGE_MOUNT_API = "1.48";
/** The Docker release that brought that API version. */
export const IMAGE_MOUNT_DOCKER = "28.0";

/** Checks an image volume's own fields (the image reference is checked when it is resolved). */
export function validateImageMount(m: MountSpec): void {
  checkPath(m.containerPath, `image volume ${m.image}: container_path`);
  if (!m.readonly) {
    throw invalidArgument(`image volume ${m.containerPath}: image volumes are read-only; set readonly to true (kubelet always does)`);
  }
  if (m.idMappings) throw unimplemented(`image volume ${m.containerPath}: uid/gid mappings are not supported on Docker`);
  if (m.propagation !== "private") {
    throw invalidArgument(`image volume ${m.containerPath}: mount propagation must be private (Docker's image mounts have no other)`);
  }
  const sub = m.imageSubPath;
  if (!sub) return;
  if (sub.startsWith("/")) throw invalidArgument(`image volume ${m.containerPath}: image_sub_path "${sub}" must be relative`);
  if (sub.split("/").includes("..")) throw invalidArgument(`image volume ${m.containerPath}: image_sub_path "${sub}" must not contain ".."`);
  if (sub.includes("\0")) throw invalidArgument(`image volume ${m.containerPath}: image_sub_path contains a NUL byte`);
}

export function imageMountsSupported(apiVersion: string): boolean {
  return compareApiVersions(apiVersion, IMAGE_MOUNT_API) >= 0;
}

/** The FAILED_PRECONDITION for an engine that cannot mount images, naming it. */
export function imageMountsRefused(apiVersion: string, dockerVersion: string, mounts: readonly MountSpec[]): CridockError {
  const first = mounts.find((m) => m.image);
  return failedPrecondition(
    `image volume ${first?.image ?? ""} at ${first?.containerPath ?? ""}: image volumes need Docker Engine API ${IMAGE_MOUNT_API} (Docker ${IMAGE_MOUNT_DOCKER}) or newer; this engine is Docker ${dockerVersion} with Engine API ${apiVersion}`,
  );
}

/** The Docker mount of an image volume whose image resolved to `imageId`. */
export function dockerImageMount(m: MountSpec, imageId: string): DockerMount {
  return {
    Type: "image",
    Source: imageId,
    Target: m.containerPath,
    ReadOnly: true,
    ...(m.imageSubPath ? { ImageOptions: { Subpath: m.imageSubPath } } : {}),
  };
}

/**
 * The image id an image volume at `containerPath` was mounted from, as the
 * container's HostConfig.Mounts holds it (dockerImageMount's Source: the id
 * the reference resolved to at create, the id PullImage returned); "" when
 * none is there.
 */
export function imageRefOfMount(mounts: readonly DockerMount[] | null | undefined, containerPath: string): string {
  return mounts?.find((m) => m.Type === "image" && m.Target === containerPath)?.Source ?? "";
}
