/**
 * dockerd's error answers as domain errors: the HTTP status decides the gRPC
 * code, and Docker's own message is kept so a person sees the cause.
 */
import { CridockError, type ErrorCode } from "../errors.ts";

/** An error answer from dockerd, with its HTTP status. */
export class DockerError extends CridockError {
  readonly statusCode: number;
  readonly dockerMessage: string;

  constructor(statusCode: number, dockerMessage: string, what: string) {
    super(codeForStatus(statusCode, dockerMessage), `${what}: ${dockerMessage || `HTTP ${statusCode}`}`);
    this.name = "DockerError";
    this.statusCode = statusCode;
    this.dockerMessage = dockerMessage;
  }
}

function codeForStatus(status: number, message: string): ErrorCode {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return /already in use|already exists/i.test(message) ? "ALREADY_EXISTS" : "FAILED_PRECONDITION";
    case 503:
      return "UNAVAILABLE";
    default:
      return "UNKNOWN";
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof DockerError && err.statusCode === 404;
}

export function isConflict(err: unknown): boolean {
  return err instanceof DockerError && err.statusCode === 409;
}

/** Docker's error body is JSON `{message}`, or sometimes plain text. */
export function errorMessageOf(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: string };
    if (parsed && typeof parsed.message === "string") return parsed.message;
  } catch {
    // not JSON: Docker sometimes answers plain text
  }
  return text.trim();
}

/** A 404 that is about the image ("No such image: …", as a container create answers when the image is absent). */
export function isNoSuchImage(err: unknown): boolean {
  return err instanceof DockerError && err.statusCode === 404 && /image/i.test(err.dockerMessage);
}
