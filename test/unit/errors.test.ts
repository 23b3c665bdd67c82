import t from "tap";
import { status } from "@grpc/grpc-js";
import { CridockError, invalidArgument, notFound, withContext, type ErrorCode } from "../../src/errors.ts";
import { grpcCodeOf, toServiceError } from "../../src/cri/errors.ts";
import { DockerError } from "../../src/docker/errors.ts";

t.test("every domain code maps to the gRPC code of the same name", async (t) => {
  const codes: ErrorCode[] = [
    "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "UNAUTHENTICATED",
  ];
  for (const code of codes) {
    t.equal(grpcCodeOf(new CridockError(code, "x")), status[code], code);
  }
});

t.test("errors that are not CridockError are internal bugs", async (t) => {
  const err = toServiceError(new TypeError("undefined is not a function"));
  t.equal(err.code, status.INTERNAL);
  t.match(err.details, /^internal error: undefined is not a function/);
});

t.test("the cause is kept in the message", async (t) => {
  const err = notFound("sandbox abc", new Error("No such container: abc"));
  t.equal(err.message, "sandbox abc: No such container: abc");
  t.equal((err.cause as Error).message, "No such container: abc");
  t.equal(toServiceError(err).details, "sandbox abc: No such container: abc");
});

t.test("withContext keeps the code and prefixes the context", async (t) => {
  const wrapped = withContext("creating the pause container", invalidArgument("bad sysctl"));
  t.equal(wrapped.code, "INVALID_ARGUMENT");
  t.equal(wrapped.message, "creating the pause container: bad sysctl");
  const foreign = withContext("running CNI ADD", new Error("plugin crashed"), "UNKNOWN");
  t.equal(foreign.code, "UNKNOWN");
  t.equal(foreign.message, "running CNI ADD: plugin crashed");
});

t.test("Docker HTTP statuses map to codes a caller can act on", async (t) => {
  const cases: [number, string, ErrorCode][] = [
    [400, "invalid reference format", "INVALID_ARGUMENT"],
    [401, "unauthorized", "UNAUTHENTICATED"],
    [403, "denied", "PERMISSION_DENIED"],
    [404, "No such container: x", "NOT_FOUND"],
    [409, 'Conflict. The container name "/k8s_x" is already in use', "ALREADY_EXISTS"],
    [409, "container is not running", "FAILED_PRECONDITION"],
    [500, "OCI runtime create failed", "UNKNOWN"],
    [503, "daemon is shutting down", "UNAVAILABLE"],
  ];
  for (const [http, message, code] of cases) {
    const err = new DockerError(http, message, "docker POST /containers/create");
    t.equal(err.code, code, `${http} ${message}`);
    t.equal(err.statusCode, http);
    t.match(err.message, message);
  }
});
