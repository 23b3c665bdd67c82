import t from "tap";

import type { ImageInspect, ImageSummary } from "../../../../src/docker/types.ts";
import {
  PinnedImages,
  imageConfigInfo,
  parseImageUser,
  recordFromInspect,
  recordFromSummary,
} from "../../../../src/runtime/image/records.ts";

const ID = "sha256:" + "1f".repeat(32);
const DIGEST = "sha256:" + "ab".repeat(32);

function inspect(overrides: Partial<ImageInspect> = {}): ImageInspect {
  return {
    Id: ID,
    RepoTags: ["registry.k8s.io/pause:3.10.2", "127.0.0.1:5000/cridock-test/pause:3.10"],
    RepoDigests: [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`],
    Created: "2026-01-01T00:00:00Z",
    Config: { User: "65535:65535", Cmd: ["/pause"], Env: ["PATH=/bin"] },
    Architecture: "amd64",
    Os: "linux",
    Size: 1982256,
    RootFS: { Type: "layers", Layers: ["sha256:" + "cd".repeat(32)] },
    ...overrides,
  };
}

t.test("USER: numeric part → uid, otherwise username; the group is ignored", async (t) => {
  t.same(parseImageUser("1002"), { uid: 1002n, username: "" });
  t.same(parseImageUser("www-data"), { username: "www-data" });
  t.same(parseImageUser("1003:1004"), { uid: 1003n, username: "" });
  t.same(parseImageUser("www-data:1004"), { username: "www-data" });
  t.same(parseImageUser("0"), { uid: 0n, username: "" });
  t.same(parseImageUser(""), { username: "" });
  t.same(parseImageUser(undefined), { username: "" });
  t.same(parseImageUser(":1004"), { username: "" });
  t.same(parseImageUser("99999999999999999999"), { username: "99999999999999999999" }, "beyond int64 is not a uid");
});

t.test("pinned: by tag in any spelling, by digest, by id", async (t) => {
  const tags = ["registry.k8s.io/pause:3.10.2"];
  const digests = [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`];
  t.ok(new PinnedImages(["registry.k8s.io/pause:3.10.2"]).isPinned(ID, tags, digests));
  t.notOk(new PinnedImages(["registry.k8s.io/pause:3.9"]).isPinned(ID, tags, digests));
  t.ok(new PinnedImages(["busybox"]).isPinned(ID, ["busybox:latest"], []), "docker.io short names match");
  t.ok(new PinnedImages([`127.0.0.1:5000/cridock-test/pause@${DIGEST}`]).isPinned(ID, [], digests));
  t.ok(new PinnedImages([ID]).isPinned(ID, [], []));
  t.notOk(new PinnedImages([`sha256:${"2".repeat(64)}`]).isPinned(ID, tags, digests));
});

t.test("inspect → record keeps Docker's names and size, takes the user from the config", async (t) => {
  const record = recordFromInspect(inspect(), new PinnedImages(["registry.k8s.io/pause:3.10.2"]));
  t.same(record, {
    id: ID,
    repoTags: ["registry.k8s.io/pause:3.10.2", "127.0.0.1:5000/cridock-test/pause:3.10"],
    repoDigests: [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`],
    size: 1982256n,
    uid: 65535n,
    username: "",
    pinned: true,
  });
  const byDigest = recordFromInspect(
    inspect({ RepoTags: [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`], RepoDigests: [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`] }),
    new PinnedImages([]),
  );
  t.same(byDigest.repoTags, [], "a digest reference the containerd image store lists under RepoTags is no tag");
  t.same(byDigest.repoDigests, [`127.0.0.1:5000/cridock-test/pause@${DIGEST}`]);
  const dangling = recordFromInspect(inspect({ RepoTags: ["<none>:<none>"], RepoDigests: null, Config: null }), new PinnedImages([]));
  t.same(dangling.repoTags, []);
  t.same(dangling.repoDigests, []);
  t.equal(dangling.username, "");
  t.equal(dangling.uid, undefined);
  t.equal(dangling.pinned, false);
});

t.test("summary → record equals inspect → record for the same image", async (t) => {
  const image = inspect();
  const summary: ImageSummary = {
    Id: image.Id,
    ParentId: "",
    RepoTags: image.RepoTags,
    RepoDigests: image.RepoDigests,
    Created: 0,
    Size: image.Size,
    SharedSize: -1,
    Labels: null,
    Containers: -1,
  };
  const pinned = new PinnedImages(["registry.k8s.io/pause:3.10.2"]);
  t.same(recordFromSummary(summary, parseImageUser(image.Config?.User), pinned), recordFromInspect(image, pinned));
});

t.test("verbose info carries the image config", async (t) => {
  const info = imageConfigInfo(inspect()) as { imageSpec: { config: Record<string, unknown>; rootfs: unknown; os: string } };
  t.equal(info.imageSpec.os, "linux");
  t.same(info.imageSpec.config.Cmd, ["/pause"]);
  t.equal(info.imageSpec.config.User, "65535:65535");
  t.same(info.imageSpec.rootfs, { type: "layers", diff_ids: ["sha256:" + "cd".repeat(32)] });
  t.doesNotThrow(() => JSON.stringify(info));
});
