/**
 * Pull stream handling against a fake dockerd answer: progress folding, error
 * lines, the no-progress watchdog, cancellation, credentials encoding.
 */
import t from "tap";

import type { DockerClient, RequestOptions } from "../../src/docker/client.ts";
import { DockerError } from "../../src/docker/errors.ts";
import {
  PullProgress,
  classifyPullError,
  encodeRegistryAuth,
  pullImage,
} from "../../src/docker/pull.ts";
import type { ProgressMessage } from "../../src/docker/types.ts";
import { CridockError } from "../../src/errors.ts";

interface Step {
  /** Wait this long before sending the line (lets the watchdog tick). */
  delayMs?: number;
  line: ProgressMessage;
}

interface FakeDocker {
  client: DockerClient;
  requests: { path: string; options: RequestOptions }[];
  /** True once the pull's body was closed (dockerd would see the request end). */
  closed(): boolean;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}

/** A DockerClient whose POST /images/create streams `steps`, or fails with `error`. */
function fakeDocker(steps: Step[], error?: DockerError): FakeDocker {
  const requests: FakeDocker["requests"] = [];
  let closed = false;
  const client = {
    async raw(_method: string, path: string, options: RequestOptions = {}) {
      requests.push({ path, options });
      if (error) throw error;
      const signal = options.signal;
      async function* lines() {
        for (const step of steps) {
          if (step.delayMs) await sleep(step.delayMs, signal);
          signal?.throwIfAborted();
          yield Buffer.from(JSON.stringify(step.line) + "\n");
        }
      }
      const iterator = lines();
      const body = {
        destroyed: false,
        destroy() {
          body.destroyed = true;
          closed = true;
          void iterator.return(undefined);
        },
        [Symbol.asyncIterator]: () => iterator,
      };
      return { statusCode: 200, headers: {}, body };
    },
  } as unknown as DockerClient;
  return { client, requests, closed: () => closed };
}

async function failure(promise: Promise<unknown>): Promise<CridockError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof CridockError) return err;
    throw err;
  }
  throw new Error("expected the pull to fail");
}

const layer = (id: string, status: string, current?: number, total?: number): Step => ({
  line: { id, status, progressDetail: current === undefined ? {} : { current, total } },
});

t.test("a successful pull reports layers and bytes and closes the request", async (t) => {
  const fake = fakeDocker([
    { line: { status: "Pulling from cridock-test/busybox", id: "1.36" } },
    layer("aaa", "Pulling fs layer"),
    layer("bbb", "Already exists"),
    layer("aaa", "Downloading", 100, 400),
    layer("aaa", "Downloading", 400, 400),
    layer("aaa", "Download complete"),
    layer("aaa", "Extracting", 200, 400),
    layer("aaa", "Pull complete"),
    { line: { status: "Digest: sha256:" + "ab".repeat(32) } },
    { line: { status: "Status: Downloaded newer image for 127.0.0.1:5000/cridock-test/busybox:1.36" } },
  ]);
  const seen: number[] = [];
  const result = await pullImage(fake.client, {
    fromImage: "127.0.0.1:5000/cridock-test/busybox",
    tag: "1.36",
    progressDeadlineMs: 60_000,
    onProgress: (s) => seen.push(s.layersDone),
  });
  t.same(
    { layersTotal: result.layersTotal, layersDone: result.layersDone, bytesDone: result.bytesDone, bytesTotal: result.bytesTotal },
    { layersTotal: 2, layersDone: 2, bytesDone: 400, bytesTotal: 400 },
  );
  t.ok(seen.length > 0, "progress was reported");
  t.equal(fake.requests[0]!.path, "/images/create");
  t.same(fake.requests[0]!.options.query, { fromImage: "127.0.0.1:5000/cridock-test/busybox", tag: "1.36" });
  t.same(fake.requests[0]!.options.headers, {}, "no credentials → no X-Registry-Auth");
  t.equal(fake.requests[0]!.options.timeoutMs, 0, "the pull has no fixed request deadline");
  t.ok(fake.closed());
});

t.test("an error line inside the 200 stream fails the pull with the right code and Docker's message", async (t) => {
  const cases: [string, string][] = [
    ["manifest for x:nope not found: manifest unknown: manifest unknown", "NOT_FOUND"],
    ["unauthorized: authentication required", "UNAUTHENTICATED"],
    ["denied: requested access to the resource is denied", "PERMISSION_DENIED"],
    ["failed to register layer: no space left on device", "UNKNOWN"],
  ];
  for (const [message, code] of cases) {
    const fake = fakeDocker([layer("aaa", "Pulling fs layer"), { line: { error: message, errorDetail: { message } } }]);
    const err = await failure(pullImage(fake.client, { fromImage: "x", tag: "nope", progressDeadlineMs: 0 }));
    t.equal(err.code, code, message);
    t.match(err.message, message, "Docker's message is kept");
    t.match(err.message, "x:nope", "the message names the image");
    t.ok(fake.closed(), "the request is closed");
  }
});

t.test("HTTP errors before the stream are classified by Docker's message, not only the status", async (t) => {
  const cases: [number, string, string][] = [
    [500, "unauthorized: authentication required", "UNAUTHENTICATED"],
    [500, 'Head "http://127.0.0.1:5001/v2/x/manifests/1": no basic auth credentials', "UNAUTHENTICATED"],
    [404, "manifest for x:1 not found: manifest unknown: manifest unknown", "NOT_FOUND"],
    [400, "invalid reference format: repository name must be lowercase", "INVALID_ARGUMENT"],
    [500, 'Get "http://127.0.0.1:5099/v2/": dial tcp 127.0.0.1:5099: connect: connection refused', "UNAVAILABLE"],
    [500, "something else", "UNKNOWN"],
  ];
  for (const [status, message, code] of cases) {
    const fake = fakeDocker([], new DockerError(status, message, "docker POST /images/create"));
    const err = await failure(pullImage(fake.client, { fromImage: "x", tag: "1", progressDeadlineMs: 0 }));
    t.equal(err.code, code, message);
    t.match(err.message, message);
  }
});

t.test("a pull that stops making progress is aborted with a message saying so", async (t) => {
  const fake = fakeDocker([layer("aaa", "Downloading", 1, 10), { delayMs: 5_000, line: layer("aaa", "Downloading", 2, 10).line }]);
  const err = await failure(pullImage(fake.client, { fromImage: "x", tag: "1", progressDeadlineMs: 100 }));
  t.equal(err.code, "DEADLINE_EXCEEDED");
  t.match(err.message, /no progress for 100ms/);
  t.match(err.message, /--image-pull-progress-deadline/);
  t.ok(fake.closed(), "the request to dockerd is closed");
});

t.test("a long pull that keeps reporting progress is not aborted", async (t) => {
  // Each line arrives well within the deadline, while the whole pull takes several deadlines.
  const steps: Step[] = [];
  for (let i = 1; i <= 8; i++) steps.push({ delayMs: 40, line: layer("aaa", "Extracting", i * 10, 80).line });
  steps.push({ line: layer("aaa", "Pull complete").line });
  const fake = fakeDocker(steps);
  const result = await pullImage(fake.client, { fromImage: "x", tag: "1", progressDeadlineMs: 150 });
  t.equal(result.layersDone, 1);
});

t.test("repeating the same line is not progress", async (t) => {
  const progress = new PullProgress();
  t.ok(progress.apply(layer("a", "Waiting").line));
  t.notOk(progress.apply(layer("a", "Waiting").line));
  t.ok(progress.apply(layer("a", "Downloading", 5, 10).line));
  t.notOk(progress.apply(layer("a", "Downloading", 5, 10).line));
  t.ok(progress.apply(layer("a", "Extracting", 5, 10).line));
  t.ok(progress.apply(layer("a", "Extracting", 6, 10).line));
  t.same(progress.snapshot(), { layersTotal: 1, layersDone: 0, bytesDone: 5, bytesTotal: 10, lastStatus: "Extracting" });
});

t.test("the caller's abort ends the pull with the caller's reason and closes the request", async (t) => {
  const fake = fakeDocker([layer("aaa", "Downloading", 1, 10), { delayMs: 5_000, line: layer("aaa", "Pull complete").line }]);
  const controller = new AbortController();
  setTimeout(() => controller.abort(new CridockError("CANCELLED", "PullImage: cancelled by the client")), 50);
  const err = await failure(
    pullImage(fake.client, { fromImage: "x", tag: "1", progressDeadlineMs: 60_000, signal: controller.signal }),
  );
  t.equal(err.code, "CANCELLED");
  t.ok(fake.closed());
});

t.test("credentials become Docker's X-Registry-Auth", async (t) => {
  const decode = (value: string | undefined) => JSON.parse(Buffer.from(value!, "base64url").toString());
  t.equal(encodeRegistryAuth(undefined), undefined);
  t.equal(encodeRegistryAuth({}), undefined);
  t.same(decode(encodeRegistryAuth({ username: "u", password: "p", serverAddress: "127.0.0.1:5001" })), {
    username: "u",
    password: "p",
    serveraddress: "127.0.0.1:5001",
  });
  t.same(decode(encodeRegistryAuth({ auth: Buffer.from("user:pa:ss").toString("base64") })), {
    username: "user",
    password: "pa:ss",
  });
  t.same(decode(encodeRegistryAuth({ identityToken: "id", registryToken: "reg" })), {
    identitytoken: "id",
    registrytoken: "reg",
  });
  t.throws(() => encodeRegistryAuth({ auth: Buffer.from("nocolon").toString("base64") }), { code: "INVALID_ARGUMENT" });
  for (const username of ["a", "ab", "abc"]) {
    const header = encodeRegistryAuth({ username, password: "p?>" })!;
    t.match(header, /^[A-Za-z0-9_-]+=*$/, "URL alphabet");
    t.equal(header.length % 4, 0, "padded, as Go's base64.URLEncoding requires");
  }

  const fake = fakeDocker([{ line: { status: "Status: Image is up to date for x:1" } }]);
  await pullImage(fake.client, { fromImage: "x", tag: "1", progressDeadlineMs: 0, auth: { username: "u", password: "p" } });
  t.same(decode(fake.requests[0]!.options.headers!["x-registry-auth"]), { username: "u", password: "p" });
});

t.test("Docker Hub's ambiguous 'pull access denied … does not exist' is NOT_FOUND", async (t) => {
  t.equal(
    classifyPullError("pull access denied for nope, repository does not exist or may require 'docker login': denied"),
    "NOT_FOUND",
  );
  t.equal(
    classifyPullError(
      'failed to resolve reference "127.0.0.1:5001/x:1": pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials',
    ),
    "UNAUTHENTICATED",
    "the containerd image store names the cause after the ambiguous phrase",
  );
});
