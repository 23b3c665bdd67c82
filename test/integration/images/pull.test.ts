// PullImage against the local registry: image_ref is Docker's id, tags and
// digests, concurrent pulls of one image, a missing tag, a malformed reference, a 1 ms deadline, and a
// registry that accepts connections but never answers (the client deadline
// and the no-progress watchdog both abort the pull and close Docker's request).
import t from "tap";
import { createServer, type Server } from "node:http";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { escapeRegExp } from "../../helpers/regexp.ts";
import { PULL_TEST_IMAGE } from "../../helpers/env.ts";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dockerInspect, dockerProxy, imageState, pullAll, repositoryOf, usesContainerdStore } from "./helpers.ts";

const IMAGE = PULL_TEST_IMAGE;
const PROGRESS_DEADLINE = "3s";

/**
 * A registry on loopback that answers the /v2/ ping and then holds every
 * other request open without answering; it counts the requests it held.
 */
async function stuckRegistry(): Promise<{ address: string; held: () => number; close(): Promise<void> }> {
  let held = 0;
  const server: Server = createServer((req, res) => {
    if (req.url === "/v2/" || req.url === "/v2") {
      res.writeHead(200, { "content-type": "application/json", "docker-distribution-api-version": "registry/2.0" });
      res.end("{}");
      return;
    }
    held++;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    held: () => held,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Waits (bounded) until `check` holds; returns whether it did. */
async function eventually(check: () => boolean, timeoutMs = 20_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

// The stuck-registry cases wait out real deadlines.
t.setTimeout(240_000);

t.test("PullImage", async (t) => {
  // cridock talks to dockerd through a proxy that shows when a pull request is closed.
  const scratch = await mkdtemp(join(tmpdir(), "cridock-pull-test-"));
  const proxy = await dockerProxy(scratch);
  const cridock = await startCridockProcess({
    flags: ["--network-plugin=no-op", `--image-pull-progress-deadline=${PROGRESS_DEADLINE}`, `--docker-endpoint=${proxy.endpoint}`],
  });
  t.teardown(async () => {
    await cridock.stop();
    await proxy.close();
    await rm(scratch, { recursive: true, force: true });
  });
  const { client } = cridock;
  await pullAll(client, [IMAGE]);
  const before = await imageState([IMAGE]);
  const digestRef = (await dockerInspect(IMAGE))!.RepoDigests![0]!;

  t.test("by tag: image_ref is Docker's image id, the same as ImageStatus.id", async (t) => {
    await client.imageCall("RemoveImage", { image: { image: IMAGE } });
    t.equal(await dockerInspect(IMAGE), undefined, "removed first, so the pull is real");
    const { imageRef } = await client.imageCall("PullImage", { image: { image: IMAGE } });
    const docker = await dockerInspect(IMAGE);
    t.equal(imageRef, docker?.Id);
    t.match(imageRef, /^sha256:[0-9a-f]{64}$/);
    const { image } = await client.imageCall("ImageStatus", { image: { image: IMAGE } });
    t.equal(image.id, imageRef);
    t.ok(image.repoTags.includes(IMAGE));
    // stderr reaches the test asynchronously, after the reply.
    // The classic store downloads the one layer again; the containerd store may still hold its blob and report none.
    const layers = (await usesContainerdStore()) ? String.raw`[01]` : "1";
    const logged = new RegExp(`"layersDone":${layers},.*"msg":"pulled image"`);
    t.ok(await eventually(() => logged.test(cridock.logs())), "the pull is logged with its layers");
  });

  t.test("concurrent pulls of one image make one Docker pull and all get its id", async (t) => {
    await client.imageCall("RemoveImage", { image: { image: IMAGE } });
    const pullsBefore = proxy.pullRequests();
    // Ten at once, as kubelet's parallel pulls (or 30 RunPodSandbox on a node without the pause image) ask.
    const refs = await Promise.all(Array.from({ length: 10 }, () => client.imageCall("PullImage", { image: { image: IMAGE } })));
    const id = (await dockerInspect(IMAGE))?.Id;
    t.same(new Set(refs.map((r) => r.imageRef)), new Set([id]), "every caller gets the image id");
    t.equal(proxy.pullRequests() - pullsBefore, 1, "dockerd was asked once");
  });

  t.test("by digest: no tag, the digest in RepoDigests", async (t) => {
    await client.imageCall("RemoveImage", { image: { image: IMAGE } });
    const { imageRef } = await client.imageCall("PullImage", { image: { image: digestRef } });
    const { image } = await client.imageCall("ImageStatus", { image: { image: digestRef } });
    t.equal(image.id, imageRef);
    t.same(image.repoTags, []);
    t.same(image.repoDigests, [digestRef]);
    // name:tag@digest pulls the digest too.
    const tagged = `${repositoryOf(IMAGE)}:1@${digestRef.split("@")[1]}`;
    const again = await client.imageCall("PullImage", { image: { image: tagged } });
    t.equal(again.imageRef, imageRef);
    await pullAll(client, [IMAGE]);
  });

  t.test("a missing tag is NOT_FOUND with Docker's message", async (t) => {
    await t.rejects(client.imageCall("PullImage", { image: { image: `${repositoryOf(IMAGE)}:no-such-tag` } }), {
      code: grpcStatus.NOT_FOUND,
      // Docker's own words: "manifest unknown" (classic store) or "not found" (containerd store).
      details: /no-such-tag.*(manifest unknown|not found)/,
    });
    await t.rejects(client.imageCall("PullImage", { image: { image: "127.0.0.1:5000/cridock-test/no-such-repo:1" } }), {
      code: grpcStatus.NOT_FOUND,
    });
  });

  t.test("a malformed reference is INVALID_ARGUMENT naming it", async (t) => {
    for (const image of ["127.0.0.1:5000/UPPER/case:1", "busybox:bad tag", "x@sha256:123"]) {
      await t.rejects(client.imageCall("PullImage", { image: { image } }), {
        code: grpcStatus.INVALID_ARGUMENT,
        details: new RegExp(escapeRegExp(image)),
      });
    }
    await t.rejects(client.imageCall("PullImage", { image: { image: "" } }), { code: grpcStatus.INVALID_ARGUMENT });
  });

  t.test("a 1 ms deadline is DEADLINE_EXCEEDED", async (t) => {
    await t.rejects(client.imageCall("PullImage", { image: { image: IMAGE } }, { timeoutMs: 1 }), {
      code: grpcStatus.DEADLINE_EXCEEDED,
    });
  });

  t.test("the client's deadline aborts a hanging pull and closes Docker's request", async (t) => {
    const registry = await stuckRegistry();
    t.teardown(() => registry.close());
    await t.rejects(
      client.imageCall("PullImage", { image: { image: `${registry.address}/stuck/image:1` } }, { timeoutMs: 1500 }),
      { code: grpcStatus.DEADLINE_EXCEEDED },
    );
    t.ok(registry.held() > 0, "dockerd was waiting on the registry");
    const stuck = `${registry.address}/stuck/image`;
    t.equal(proxy.pullRequests(stuck), 1, "the pull reached dockerd");
    t.ok(await eventually(() => proxy.openPulls(stuck) === 0), "cridock closed its pull request to dockerd");
    // cridock keeps serving.
    const { image } = await client.imageCall("ImageStatus", { image: { image: IMAGE } });
    t.ok(image);
  });

  t.test("a pull with no progress for --image-pull-progress-deadline is aborted with a message saying so", async (t) => {
    const registry = await stuckRegistry();
    t.teardown(() => registry.close());
    await t.rejects(client.imageCall("PullImage", { image: { image: `${registry.address}/stuck/image:2` } }, { timeoutMs: 60_000 }), {
      code: grpcStatus.DEADLINE_EXCEEDED,
      details: /no progress for 3s.*--image-pull-progress-deadline/,
    });
    t.ok(registry.held() > 0, "dockerd was waiting on the registry");
    const stuck = `${registry.address}/stuck/image`;
    t.equal(proxy.pullRequests(stuck), 1, "the pull reached dockerd");
    t.ok(await eventually(() => proxy.openPulls(stuck) === 0), "cridock closed its pull request to dockerd");
  });

  t.test("nothing changed in dockerd", async (t) => {
    t.same(await imageState([IMAGE]), before);
    t.equal(await dockerInspect("127.0.0.1:5000/cridock-test/no-such-repo:1"), undefined);
  });
});
