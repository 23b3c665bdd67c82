/**
 * The hook through which the Docker client reports each request's latency
 * and outcome (metrics/ turns them into series). Plain data, no Prometheus.
 */
import { CridockError } from "../errors.ts";
import { DockerError } from "./errors.ts";

/** What a Docker API request ended with. `path` is unversioned and without the query. */
export interface DockerRequestOutcome {
  /** HTTP status when dockerd answered. */
  statusCode?: number;
  /** Set when the request failed: an HTTP status ≥ 400 or a transport problem. */
  error?: "http" | "unreachable" | "timeout" | "cancelled" | "other";
}
export type DockerRequestObserver = (method: string, path: string, seconds: number, outcome: DockerRequestOutcome) => void;

/** The outcome a failed request reports, from the error it is thrown as. */
export function failureOutcome(err: unknown): DockerRequestOutcome {
  if (err instanceof DockerError) return { statusCode: err.statusCode, error: "http" };
  const code = err instanceof CridockError ? err.code : undefined;
  if (code === "UNAVAILABLE") return { error: "unreachable" };
  if (code === "DEADLINE_EXCEEDED") return { error: "timeout" };
  if (code === "CANCELLED") return { error: "cancelled" };
  return { error: "other" };
}
