/**
 * Docker's image objects → cridock's plain ImageRecord, one conversion for
 * ImageStatus and ListImages so that an image looks the same whichever RPC
 * or reference form found it.
 */
import type { ImageInspect, ImageSummary } from "../../docker/types.ts";
import { lookupKey, normalizeReported, normalizedString, parseImageReference, repositoryOf, type ImageReference } from "./reference.ts";

/** An image as CRI reports it, in plain types. */
export interface ImageRecord {
  /** Docker's image id, `sha256:<hex>`. */
  id: string;
  /** As Docker reports them ("busybox:latest", "127.0.0.1:5000/x:1"); `<none>` placeholders dropped. */
  repoTags: string[];
  repoDigests: string[];
  /** Bytes, > 0 for any real image. */
  size: bigint;
  /** The image's USER when its user part is numeric. */
  uid?: bigint;
  /** The image's USER when its user part is a name; "" otherwise. */
  username: string;
  /** True for images cridock must keep (the pause image): kubelet's GC skips them. */
  pinned: boolean;
}

/** The user an image runs as, from its USER instruction. */
export interface ImageUser {
  uid?: bigint;
  username: string;
}

const UID = /^[0-9]{1,19}$/;
const INT64_MAX = (1n << 63n) - 1n;

/**
 * Splits Docker's `Config.User` ("1002", "www-data", "1003:1004",
 * "www-data:1004"): the part before ":" is a uid when numeric, otherwise a
 * user name. The group is not part of CRI's Image message.
 */
export function parseImageUser(user: string | undefined | null): ImageUser {
  const name = (user ?? "").split(":", 1)[0]!.trim();
  if (name === "") return { username: "" };
  if (UID.test(name)) {
    const uid = BigInt(name);
    if (uid <= INT64_MAX) return { uid, username: "" };
  }
  return { username: name };
}

function present(names: string[] | null | undefined): string[] {
  return (names ?? []).filter((n) => !n.startsWith("<none>"));
}

/**
 * Decides whether an image is pinned: true when it is the image named by one
 * of the pinned references (a tag, a digest, or an id).
 */
export class PinnedImages {
  private readonly refs: ImageReference[];

  constructor(references: string[]) {
    this.refs = references.map((r) => parseImageReference(r));
  }

  isPinned(id: string, repoTags: string[], repoDigests: string[]): boolean {
    for (const ref of this.refs) {
      if (ref.kind === "id") {
        if (ref.prefix ? id.startsWith(ref.id) : id === ref.id) return true;
      } else if (ref.digest) {
        const wanted = `${repositoryOf(ref)}@${ref.digest}`;
        if (repoDigests.some((d) => normalizeReported(d) === wanted)) return true;
      } else {
        const wanted = normalizedString(ref);
        if (repoTags.some((t) => normalizeReported(t) === wanted)) return true;
      }
    }
    return false;
  }

  /** Docker lookup keys of the pinned references (for ensureImage at start-up, for example). */
  keys(): string[] {
    return this.refs.map(lookupKey);
  }
}

export function recordFromInspect(image: ImageInspect, pinned: PinnedImages): ImageRecord {
  return record(image, parseImageUser(image.Config?.User), pinned);
}

/** ListImages' summary lacks the image config, so the user comes from a cache of inspections. */
export function recordFromSummary(image: ImageSummary, user: ImageUser, pinned: PinnedImages): ImageRecord {
  return record(image, user, pinned);
}

/** The fields an inspection and a list summary share, plus the user found for the image. */
function record(
  image: Pick<ImageInspect, "Id" | "RepoTags" | "RepoDigests" | "Size">,
  user: ImageUser,
  pinned: PinnedImages,
): ImageRecord {
  // The containerd image store lists an image pulled by digest under RepoTags as "name@sha256:…": a digest, not a tag.
  const names = present(image.RepoTags);
  const repoTags = names.filter((n) => !n.includes("@"));
  const repoDigests = [...new Set([...present(image.RepoDigests), ...names.filter((n) => n.includes("@"))])];
  return {
    id: image.Id,
    repoTags,
    repoDigests,
    size: BigInt(Math.max(0, Math.trunc(image.Size ?? 0))),
    ...user,
    pinned: pinned.isPinned(image.Id, repoTags, repoDigests),
  };
}

/**
 * The verbose ImageStatus payload: the image's OCI-style config (what
 * `crictl inspecti` shows under "info"), built from Docker's inspect answer.
 */
export function imageConfigInfo(image: ImageInspect): Record<string, unknown> {
  const config = image.Config ?? {};
  return {
    imageSpec: {
      created: image.Created,
      author: image.Author || undefined,
      architecture: image.Architecture,
      variant: image.Variant || undefined,
      os: image.Os,
      config: {
        User: config.User || undefined,
        ExposedPorts: config.ExposedPorts ?? undefined,
        Env: config.Env ?? undefined,
        Entrypoint: config.Entrypoint ?? undefined,
        Cmd: config.Cmd ?? undefined,
        Volumes: config.Volumes ?? undefined,
        WorkingDir: config.WorkingDir || undefined,
        Labels: config.Labels ?? undefined,
        StopSignal: config.StopSignal || undefined,
      },
      rootfs: { type: image.RootFS?.Type ?? "layers", diff_ids: image.RootFS?.Layers ?? [] },
    },
  };
}
