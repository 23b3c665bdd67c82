/**
 * What CreateContainer must learn from the engine and the images before it
 * can build Docker's create body, asked only when the request needs it: the
 * API version; SELinux relabelling; the engine's image mount and CDI
 * support; the ids of image volumes (and that their sub-paths exist); the
 * Strict policy's `user:group`.
 */
import type { DockerClient } from "../../docker/client.ts";
import { failedPrecondition } from "../../errors.ts";
import { requireCdi } from "./cdi.ts";
import type { CreateContext } from "./create.ts";
import type { ImageFileReader } from "../image-files.ts";
import { imageMountsRefused, imageMountsSupported } from "./image-mounts.ts";
import type { ContainerSpec } from "./spec.ts";
import { needsPasswd, parsePasswd, requestedUser, strictUserString } from "../strict-user.ts";

export interface ContextImages {
  /** `{ id: "sha256:…" }`, or NOT_FOUND "image X is not present; pull it first". */
  resolveImage(reference: string): Promise<{ id: string; inspect?: { Config?: { User?: string; Entrypoint?: string[] | null; Cmd?: string[] | null } | null } }>;
}

/** What resolveImage answers. */
export type ResolvedImage = Awaited<ReturnType<ContextImages["resolveImage"]>>;

export interface ContextDeps {
  docker: Pick<DockerClient, "apiVersion" | "info" | "version">;
  images: ContextImages;
  files: ImageFileReader;
}

/** The container's own image, resolved by the caller. */
export interface ContainerImage {
  id: string;
  user?: string;
}

export async function createContext(spec: ContainerSpec, image: ContainerImage, deps: ContextDeps): Promise<CreateContext> {
  const apiVersion = await deps.docker.apiVersion();
  // Docker relabels for SELinux only when its SELinux support is on; asked only when a mount wants it.
  const relabels = spec.mounts.some((m) => m.selinuxRelabel && !m.image)
    ? ((await deps.docker.info()).SecurityOptions ?? []).some((o) => o.includes("name=selinux"))
    : false;
  if (spec.cdiDevices.length > 0) requireCdi(await deps.docker.info(), apiVersion, spec.cdiDevices);
  const imageMountIds = await resolveImageMounts(spec, apiVersion, deps);
  const context: CreateContext = { apiVersion, relabels, imageMountIds };
  const sc = spec.security;
  if (sc?.supplementalGroupsStrict) {
    const requested = requestedUser(sc, image.user);
    let passwd;
    if (needsPasswd(requested)) {
      const text = await deps.files.readText(image.id, "/etc/passwd");
      passwd = text === undefined ? undefined : parsePasswd(text);
    }
    context.user = strictUserString(requested, passwd, spec.image);
  }
  return context;
}

async function resolveImageMounts(spec: ContainerSpec, apiVersion: string, deps: ContextDeps): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  const imageMounts = spec.mounts.filter((m) => m.image);
  if (imageMounts.length === 0) return ids;
  // The engine's version is asked only to name it in the refusal.
  if (!imageMountsSupported(apiVersion)) throw imageMountsRefused(apiVersion, (await deps.docker.version()).Version, imageMounts);
  for (const m of imageMounts) {
    let id = ids.get(m.image);
    if (!id) {
      id = (await deps.images.resolveImage(m.image)).id;
      ids.set(m.image, id);
    }
    if (m.imageSubPath && !(await deps.files.exists(id, `/${m.imageSubPath}`))) {
      throw failedPrecondition(`image volume ${m.containerPath}: image_sub_path "${m.imageSubPath}" does not exist in image ${m.image}`);
    }
  }
  return ids;
}
