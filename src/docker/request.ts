/**
 * The shape of one Engine API request and answer as DockerClient takes and
 * gives them, and the small encodings that need no connection: the query
 * string and the endpoint's socket path.
 */
import type { Dispatcher } from "undici";
import { CridockError } from "../errors.ts";

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  /** JSON-encoded unless it is a Buffer or a stream. */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Overrides the default deadline; 0 means none (streams). */
  timeoutMs?: number;
  /** Path without the /vX.Y prefix (only /_ping and /version are used so). */
  unversioned?: boolean;
  /**
   * The request may hold its connection for long (a stop with a grace
   * period); implied by timeoutMs 0. Such requests never take a connection
   * of the quick pool.
   */
  long?: boolean;
}

export interface RawResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  /** undici body: also an async iterable of Buffers and a Readable. */
  body: Dispatcher.ResponseData["body"];
}

export function socketPathOf(endpoint: string): string {
  if (endpoint.startsWith("unix://")) return endpoint.slice("unix://".length);
  if (endpoint.startsWith("/")) return endpoint;
  throw new CridockError("INVALID_ARGUMENT", `docker endpoint ${endpoint} is not a unix:// socket`);
}

/** A query string Docker reads: booleans as 1/0, undefined values left out. */
export function encodeQuery(query: Query): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    params.set(key, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}
