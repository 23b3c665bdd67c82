/**
 * runtime.v1.ImageService handlers: decode and validate the CRI request, call
 * the ImageManager, encode its plain records as CRI messages.
 */
import type { CallContext, HandlerTable } from "./handlers.ts";
import type * as cri from "./proto-types.ts";
import type { FilesystemUsage, ImageFilesystem } from "../runtime/image/imagefs.ts";
import type { ImageManager, ImageRecord, RegistryAuth } from "../runtime/image/manager.ts";
import { invalidArgument } from "../errors.ts";
import { sendInBatches } from "./list-stream.ts";

export interface ImageServiceDeps {
  imageFs: ImageFilesystem;
  images: ImageManager;
  /**
   * Writable-layer usage of containers, once the stats collector has measured
   * it; until then ImageFsInfo reports no container filesystems.
   */
  containerFilesystems?: () => Promise<FilesystemUsage[]>;
}

export function imageServiceRpcs({ imageFs, images, containerFilesystems }: ImageServiceDeps): HandlerTable {
  const listImages = async (filter: cri.ImageFilter | null | undefined): Promise<cri.Image[]> =>
    (await images.list(filter?.image?.image || undefined)).map(toCriImage);

  return {
    async ImageStatus(request: cri.ImageStatusRequest): Promise<cri.ImageStatusResponse> {
      const status = await images.status(imageOf(request.image, "ImageStatus"));
      if (!status) return { image: null, info: {} };
      return {
        image: toCriImage(status.record),
        info: request.verbose ? { info: JSON.stringify(status.info) } : {},
      };
    },

    async ListImages(request: cri.ListImagesRequest): Promise<cri.ListImagesResponse> {
      return { images: await listImages(request.filter) };
    },

    async StreamImages(request: cri.StreamImagesRequest, _ctx, send) {
      await sendInBatches(await listImages(request.filter), (batch) => send({ images: batch }));
    },

    async PullImage(request: cri.PullImageRequest, ctx: CallContext): Promise<cri.PullImageResponse> {
      const reference = imageOf(request.image, "PullImage");
      const imageRef = await images.pull(reference, { auth: authOf(request.auth), signal: ctx.signal });
      return { imageRef };
    },

    async RemoveImage(request: cri.RemoveImageRequest): Promise<cri.RemoveImageResponse> {
      await images.remove(imageOf(request.image, "RemoveImage"));
      return {};
    },

    async ImageFsInfo(): Promise<cri.ImageFsInfoResponse> {
      const [usage, containers] = await Promise.all([imageFs.usage(), containerFilesystems?.() ?? Promise.resolve([])]);
      return {
        imageFilesystems: [toCriFilesystem(usage)],
        containerFilesystems: containers.map(toCriFilesystem),
      };
    },
  };
}

function imageOf(spec: cri.ImageSpec | null | undefined, rpc: string): string {
  const image = spec?.image;
  if (!image) throw invalidArgument(`${rpc}: image.image is required (a name, name:tag, name@digest or image id)`);
  return image;
}

function authOf(auth: cri.AuthConfig | null | undefined): RegistryAuth | undefined {
  if (!auth) return undefined;
  return {
    username: auth.username || undefined,
    password: auth.password || undefined,
    auth: auth.auth || undefined,
    serverAddress: auth.serverAddress || undefined,
    identityToken: auth.identityToken || undefined,
    registryToken: auth.registryToken || undefined,
  };
}

export function toCriImage(record: ImageRecord): cri.Image {
  return {
    id: record.id,
    repoTags: record.repoTags,
    repoDigests: record.repoDigests,
    size: record.size,
    uid: record.uid === undefined ? null : { value: record.uid },
    username: record.username,
    spec: null,
    pinned: record.pinned,
  };
}

function toCriFilesystem(usage: FilesystemUsage): cri.FilesystemUsage {
  return {
    timestamp: usage.timestamp,
    fsId: { mountpoint: usage.mountpoint },
    usedBytes: { value: usage.usedBytes },
    inodesUsed: { value: usage.inodesUsed },
  };
}
