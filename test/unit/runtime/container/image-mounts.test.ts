import t from "tap";
import { dockerImageMount, imageMountsRefused, imageMountsSupported, validateImageMount } from "../../../../src/runtime/container/image-mounts.ts";
import { validateMounts } from "../../../../src/runtime/container/mounts.ts";
import type { MountSpec } from "../../../../src/runtime/container/spec.ts";

const mount = (over: Partial<MountSpec> = {}): MountSpec => ({
  containerPath: "/data", hostPath: "", readonly: true, selinuxRelabel: false, propagation: "private",
  recursiveReadOnly: false, image: "registry.test/content:1", imageSubPath: "", ...over,
});

t.test("image volumes are checked for what Docker's image mounts can carry", async (t) => {
  t.doesNotThrow(() => validateImageMount(mount()));
  t.doesNotThrow(() => validateImageMount(mount({ imageSubPath: "sub/dir" })));
  t.throws(() => validateImageMount(mount({ imageSubPath: "/abs" })), { code: "INVALID_ARGUMENT", message: /relative/ });
  t.throws(() => validateImageMount(mount({ imageSubPath: "a/../../etc" })), { code: "INVALID_ARGUMENT", message: /\.\./ });
  t.throws(() => validateImageMount(mount({ containerPath: "rel" })), { code: "INVALID_ARGUMENT", message: /absolute/ });
  t.throws(() => validateImageMount(mount({ propagation: "bidirectional" })), { code: "INVALID_ARGUMENT", message: /private/ });
  t.throws(() => validateImageMount(mount({ idMappings: { uids: [{ containerId: 0, hostId: 65536, length: 65536 }], gids: [{ containerId: 0, hostId: 65536, length: 65536 }] } })), { code: "UNIMPLEMENTED" });
  t.doesNotThrow(() => validateMounts([mount(), mount({ containerPath: "/other" })]), "no host path is needed; the same image may go to two places");
  t.throws(() => validateMounts([mount(), mount()]), /two mounts target \/data/);
});

t.test("engines before API 1.48 are refused with their version named", async (t) => {
  t.equal(imageMountsSupported("1.48"), true);
  t.equal(imageMountsSupported("1.52"), true);
  t.equal(imageMountsSupported("1.47"), false);
  t.match(imageMountsRefused("1.41", "20.10.24+dfsg1", [mount()]), {
    code: "FAILED_PRECONDITION",
    message: /registry\.test\/content:1 at \/data.*Engine API 1\.48 \(Docker 28\.0\).*Docker 20\.10\.24\+dfsg1 with Engine API 1\.41/,
  });
});

t.test("the Docker image mount", async (t) => {
  t.same(dockerImageMount(mount(), "sha256:abc"), { Type: "image", Source: "sha256:abc", Target: "/data", ReadOnly: true });
  t.same(dockerImageMount(mount({ imageSubPath: "sub", readonly: false }), "sha256:abc"), {
    Type: "image", Source: "sha256:abc", Target: "/data", ReadOnly: false, ImageOptions: { Subpath: "sub" },
  });
});
