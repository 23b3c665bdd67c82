import t from "tap";

import { CridockError } from "../../../../src/errors.ts";
import {
  familiarRepository,
  lookupKey,
  normalizeReported,
  normalizedString,
  parseImageReference,
  pullParameters,
  type NamedReference,
} from "../../../../src/runtime/image/reference.ts";

const DIGEST = "sha256:" + "ab".repeat(32);
const ID = "sha256:" + "0123456789abcdef".repeat(4);

function named(text: string): NamedReference {
  const ref = parseImageReference(text);
  if (ref.kind !== "named") throw new Error(`${text} parsed as ${ref.kind}`);
  return ref;
}

t.test("names normalize the way Docker does", async (t) => {
  const cases: [string, string][] = [
    ["busybox", "docker.io/library/busybox:latest"],
    ["busybox:1.36", "docker.io/library/busybox:1.36"],
    ["library/busybox", "docker.io/library/busybox:latest"],
    ["docker.io/busybox", "docker.io/library/busybox:latest"],
    ["index.docker.io/library/busybox:1", "docker.io/library/busybox:1"],
    ["user/app:v1", "docker.io/user/app:v1"],
    ["registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"],
    ["127.0.0.1:5000/cridock-test/busybox:1.36", "127.0.0.1:5000/cridock-test/busybox:1.36"],
    ["localhost/app", "localhost/app:latest"],
    ["localhost:5000/a/b/c", "localhost:5000/a/b/c:latest"],
    ["[::1]:5000/app:1", "[::1]:5000/app:1"],
    ["my-registry.example:443/a__b/c-d.e_f", "my-registry.example:443/a__b/c-d.e_f:latest"],
    [`busybox@${DIGEST}`, `docker.io/library/busybox@${DIGEST}`],
    [`127.0.0.1:5000/x:1@${DIGEST}`, `127.0.0.1:5000/x:1@${DIGEST}`],
  ];
  for (const [input, expected] of cases) t.equal(normalizedString(named(input)), expected, input);
});

t.test("a host with a port is a domain, a tag is not", async (t) => {
  const withPort = named("127.0.0.1:5000/x");
  t.equal(withPort.domain, "127.0.0.1:5000");
  t.equal(withPort.path, "x");
  t.equal(withPort.tag, "latest");
  const tagged = named("app:5000");
  t.equal(tagged.domain, "docker.io");
  t.equal(tagged.path, "library/app");
  t.equal(tagged.tag, "5000");
});

t.test("name:tag@digest resolves by the digest", async (t) => {
  const ref = named(`127.0.0.1:5000/x:1@${DIGEST}`);
  t.equal(ref.tag, "1");
  t.equal(ref.digest, DIGEST);
  t.equal(lookupKey(ref), `127.0.0.1:5000/x@${DIGEST}`);
  t.same(pullParameters(ref), { fromImage: "127.0.0.1:5000/x", tag: DIGEST });
});

t.test("image ids: full, bare 64 hex, and sha256 prefixes", async (t) => {
  t.same(parseImageReference(ID), { kind: "id", original: ID, id: ID, prefix: false });
  t.same(parseImageReference(ID.slice(7)), { kind: "id", original: ID.slice(7), id: ID, prefix: false });
  const prefix = parseImageReference("sha256:0123ab");
  t.same(prefix, { kind: "id", original: "sha256:0123ab", id: "sha256:0123ab", prefix: true });
  t.equal(lookupKey(prefix), "sha256:0123ab");
  // A short bare hex string is a valid repository name; Docker looks it up as a name first, then as an id prefix.
  const short = parseImageReference("0123ab");
  t.equal(short.kind, "named");
  t.equal(lookupKey(short), "0123ab");
});

t.test("pull parameters use Docker's familiar repository and the tag", async (t) => {
  t.same(pullParameters(named("busybox")), { fromImage: "busybox", tag: "latest" });
  t.same(pullParameters(named("docker.io/user/app:2")), { fromImage: "user/app", tag: "2" });
  t.same(pullParameters(named("127.0.0.1:5001/cridock-test/busybox:1.36")), {
    fromImage: "127.0.0.1:5001/cridock-test/busybox",
    tag: "1.36",
  });
  t.equal(familiarRepository(named("docker.io/library/a/b")), "library/a/b");
});

t.test("invalid references are INVALID_ARGUMENT and name the reference", async (t) => {
  const bad = [
    "",
    "Busybox",
    "127.0.0.1:5000/H3/bb",
    "busybox:",
    "busybox:-tag",
    "busybox@sha256:abc",
    "busybox@notadigest",
    "busy box",
    " busybox",
    "a//b",
    "-a/b",
    "a/b-",
    "host:99999/x",
    "host:port/x",
    "bad_host.example:5000/x",
    "x:" + "t".repeat(129),
    "a/" + "b".repeat(260),
  ];
  for (const input of bad) {
    let caught: unknown;
    try {
      parseImageReference(input);
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof CridockError, `${JSON.stringify(input)} is refused`);
    t.equal((caught as CridockError).code, "INVALID_ARGUMENT", `${JSON.stringify(input)} → INVALID_ARGUMENT`);
    if (input) t.match((caught as Error).message, input.slice(0, 40), `the message names ${JSON.stringify(input)}`);
  }
});

t.test("names Docker reports normalize for comparison; placeholders do not", async (t) => {
  t.equal(normalizeReported("busybox:latest"), "docker.io/library/busybox:latest");
  t.equal(normalizeReported(`busybox@${DIGEST}`), `docker.io/library/busybox@${DIGEST}`);
  t.equal(normalizeReported("<none>:<none>"), undefined);
  t.equal(normalizeReported("<none>@<none>"), undefined);
});
