/**
 * Docker API paths → endpoint templates for metric labels. A raw path holds
 * container, exec and image ids or names, so labelling by it would make one
 * series per object; the template (`/containers/{id}/start`) keeps the label
 * set bounded by the handful of endpoints cridock calls.
 */

/** Collections whose second path segment is an object id or name. */
const OBJECT_COLLECTIONS = new Set(["containers", "exec", "networks", "volumes", "plugins", "secrets", "configs", "nodes", "services", "tasks"]);
/** Second segments that are actions on the collection itself, not an object. */
const COLLECTION_ACTIONS = new Set(["json", "create", "load", "prune", "search", "get", "build"]);
/** Image actions that follow the image name (which may itself contain slashes). */
const IMAGE_ACTIONS = new Set(["json", "history", "push", "tag", "get"]);

/** `/v1.41/containers/abc/start?x=1` → `/containers/{id}/start`. */
export function dockerEndpointTemplate(path: string): string {
  const bare = path.split("?", 1)[0]!.replace(/^\/v\d+\.\d+(?=\/)/, "");
  const parts = bare.split("/").filter(Boolean);
  if (parts.length === 0) return "/";
  const [collection, second] = parts as [string, string | undefined];
  if (parts.length === 1) return `/${safeSegment(collection)}`;
  if (collection === "images") {
    if (parts.length === 2 && COLLECTION_ACTIONS.has(second!)) return `/images/${second}`;
    const last = parts[parts.length - 1]!;
    return IMAGE_ACTIONS.has(last) && parts.length > 2 ? `/images/{name}/${last}` : "/images/{name}";
  }
  if (OBJECT_COLLECTIONS.has(collection)) {
    if (parts.length === 2 && COLLECTION_ACTIONS.has(second!)) return `/${collection}/${second}`;
    const rest = parts.slice(2).map(safeSegment);
    return [`/${collection}/{id}`, ...rest].join("/");
  }
  // /_ping, /version, /info, /events, /system/df, /auth, /distribution/{name}/json …
  if (collection === "system") return `/system/${safeSegment(second!)}`;
  return `/${safeSegment(collection)}/{other}`;
}

/** Action names are short lowercase words; anything else is data, not a template. */
function safeSegment(segment: string): string {
  return /^[a-z_]{1,20}$/.test(segment) ? segment : "{other}";
}
