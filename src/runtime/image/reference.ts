/**
 * Image references, parsed and normalized the way Docker does
 * (github.com/distribution/reference grammar):
 *
 *   reference := name [ ":" tag ] [ "@" digest ]
 *   name      := [domain "/"] path-component ("/" path-component)*
 *   domain    := host [":" port]      host: dotted DNS labels, "localhost", or [IPv6]
 *
 * The first component is a domain only if it contains "." or ":", is
 * "localhost", or has upper-case letters; otherwise the domain is docker.io,
 * and single-component names there live under "library/". A name without tag
 * or digest means ":latest". `name:tag@digest` names the digest: the tag is
 * kept for display but never used to resolve, as containerd and Docker do.
 *
 * Image ids are the other form: `sha256:<64 hex>`, a bare 64-hex string, or
 * `sha256:<hex prefix>`. A bare short hex string is a valid repository name,
 * so (like Docker) it stays a name and Docker falls back to an id-prefix
 * lookup when no such repository exists.
 */
import { invalidArgument } from "../../errors.ts";

export const DEFAULT_DOMAIN = "docker.io";
export const OFFICIAL_REPO_PREFIX = "library/";
export const DEFAULT_TAG = "latest";
const LEGACY_DEFAULT_DOMAIN = "index.docker.io";
const NAME_TOTAL_LENGTH_MAX = 255;

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_LABEL = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;
const IPV6_HOST = /^\[[0-9a-fA-F:.]+(?:%[\w.-]+)?\]$/;
const PORT = /^[0-9]+$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$/;
const SHA256_DIGEST = /^sha256:[a-f0-9]{64}$/;
const FULL_ID = /^(?:sha256:)?([a-f0-9]{64})$/;
const ID_PREFIX = /^sha256:([a-f0-9]{1,63})$/;

/** A reference that names an image by repository (with tag and/or digest). */
export interface NamedReference {
  kind: "named";
  /** The text as given. */
  original: string;
  /** Registry host[:port], e.g. "docker.io" or "127.0.0.1:5000". */
  domain: string;
  /** Repository path within the registry, e.g. "library/busybox". */
  path: string;
  /** Tag as given, or "latest" when neither tag nor digest was given. */
  tag?: string;
  /** `algorithm:hex` when the reference pins a digest. */
  digest?: string;
}

/** A reference that names an image by its id (or a prefix of it). */
export interface IdReference {
  kind: "id";
  original: string;
  /** `sha256:<hex>`: the full id, or a prefix when `prefix` is true. */
  id: string;
  prefix: boolean;
}

export type ImageReference = NamedReference | IdReference;

/** Parses an image reference; INVALID_ARGUMENT (naming the reference) if it is not one. */
export function parseImageReference(input: string | undefined | null): ImageReference {
  if (input === undefined || input === null || input === "") throw invalidArgument("image reference is required");
  const text = input;
  const fail = (why: string) => invalidArgument(`invalid image reference "${clip(text)}": ${why}`);
  if (text.trim() !== text || /\s/.test(text)) throw fail("it contains white space");

  const full = FULL_ID.exec(text);
  if (full) return { kind: "id", original: text, id: `sha256:${full[1]}`, prefix: false };
  const short = ID_PREFIX.exec(text);
  if (short) return { kind: "id", original: text, id: `sha256:${short[1]}`, prefix: true };

  let rest = text;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw fail(`"${clip(digest)}" is not a digest like sha256:<hex>`);
    if (digest.startsWith("sha256:") && !SHA256_DIGEST.test(digest)) throw fail("a sha256 digest is 64 lower-case hex digits");
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw fail(`"${clip(tag)}" is not a valid tag`);
  }
  if (rest === "") throw fail("the repository name is empty");
  if (rest.length > NAME_TOTAL_LENGTH_MAX) throw fail(`the repository name is longer than ${NAME_TOTAL_LENGTH_MAX} characters`);

  const components = rest.split("/");
  let domain = DEFAULT_DOMAIN;
  const first = components[0]!;
  if (components.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost" || first !== first.toLowerCase())) {
    domain = validateDomain(first, fail);
    components.shift();
  }
  for (const component of components) {
    if (component === "") throw fail("the repository name has an empty path component");
    if (component !== component.toLowerCase()) throw fail("repository name must be lowercase");
    if (!PATH_COMPONENT.test(component)) throw fail(`"${clip(component)}" is not a valid repository path component`);
  }
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  let path = components.join("/");
  if (domain === DEFAULT_DOMAIN && components.length === 1) path = OFFICIAL_REPO_PREFIX + path;
  if (tag === undefined && digest === undefined) tag = DEFAULT_TAG;
  return { kind: "named", original: text, domain, path, tag, digest };
}

function validateDomain(domain: string, fail: (why: string) => Error): string {
  let host = domain;
  let port: string | undefined;
  if (domain.startsWith("[")) {
    const end = domain.indexOf("]");
    host = domain.slice(0, end + 1);
    const after = domain.slice(end + 1);
    if (after) {
      if (!after.startsWith(":")) throw fail(`"${domain}" is not a valid registry host`);
      port = after.slice(1);
    }
    if (!IPV6_HOST.test(host)) throw fail(`"${domain}" is not a valid registry host`);
  } else {
    const c = domain.indexOf(":");
    if (c >= 0) {
      host = domain.slice(0, c);
      port = domain.slice(c + 1);
    }
    if (!host.split(".").every((label) => DOMAIN_LABEL.test(label))) throw fail(`"${domain}" is not a valid registry host`);
  }
  if (port !== undefined && (!PORT.test(port) || Number(port) > 65535)) throw fail(`"${domain}" has an invalid port`);
  return domain;
}

/** `domain/path`, fully qualified: "docker.io/library/busybox". */
export function repositoryOf(ref: NamedReference): string {
  return `${ref.domain}/${ref.path}`;
}

/** The fully qualified form: "docker.io/library/busybox:latest", "host:5000/x@sha256:…". */
export function normalizedString(ref: NamedReference): string {
  const name = repositoryOf(ref);
  if (ref.digest) return `${name}${ref.tag ? `:${ref.tag}` : ""}@${ref.digest}`;
  return `${name}:${ref.tag ?? DEFAULT_TAG}`;
}

/** Docker's short ("familiar") repository name: "busybox", "user/app", "127.0.0.1:5000/x". */
export function familiarRepository(ref: NamedReference): string {
  if (ref.domain !== DEFAULT_DOMAIN) return repositoryOf(ref);
  return ref.path.startsWith(OFFICIAL_REPO_PREFIX) && ref.path.split("/").length === 2
    ? ref.path.slice(OFFICIAL_REPO_PREFIX.length)
    : ref.path;
}

/**
 * The string to look the image up with in dockerd. A digest wins over a tag
 * (Docker resolves `name@digest` through RepoDigests). A name without tag is
 * passed as given so Docker can still fall back to an id-prefix lookup.
 */
export function lookupKey(ref: ImageReference): string {
  if (ref.kind === "id") return ref.id;
  if (ref.digest) return `${repositoryOf(ref)}@${ref.digest}`;
  return ref.original;
}

/** What to pull: Docker's `fromImage` and `tag` (a tag or a digest) query parameters. */
export function pullParameters(ref: NamedReference): { fromImage: string; tag: string } {
  return { fromImage: familiarRepository(ref), tag: ref.digest ?? ref.tag ?? DEFAULT_TAG };
}

/**
 * Normalizes a name Docker reports (RepoTags "busybox:latest", RepoDigests
 * "busybox@sha256:…") to the fully qualified form, for comparisons. Returns
 * undefined for Docker's "<none>" placeholders and anything unparsable.
 */
export function normalizeReported(name: string): string | undefined {
  if (name.startsWith("<none>")) return undefined;
  try {
    const ref = parseImageReference(name);
    return ref.kind === "named" ? normalizedString(ref) : undefined;
  } catch {
    return undefined;
  }
}

function clip(text: string): string {
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}
