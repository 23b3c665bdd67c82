import t from "tap";
import { dockerImageMount, imageMountsRefused, imageMountsSupported, imageRefOfMount, validateImageMount } from "../../../../src/runtime/container/image-mounts.ts";
import { validateMounts } from "../../../../src/runtime/container/mounts.ts";
import type { MountSpec } from "../../../../src/runtime/container/spec.ts";
import { containerInfo } from "../../../../src/runtime/container/convert.ts";
import type { ContainerInspect } from "../../../../src/docker/types.ts";
import { statusToCri } from "../../../../src/cri/container-rpcs.ts";
import { criRoot, DECODE_OPTIONS } from "../../../../src/cri/proto.ts";

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
  t.throws(() => validateImageMount(mount({ readonly: false })), { code: "INVALID_ARGUMENT", message: /image volume \/data: image volumes are read-only; set readonly to true/ });
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
  t.same(dockerImageMount(mount({ imageSubPath: "sub" }), "sha256:abc"), {
    Type: "image", Source: "sha256:abc", Target: "/data", ReadOnly: true, ImageOptions: { Subpath: "sub" },
  });
  t.equal(dockerImageMount(mount({ readonly: false }), "sha256:abc").ReadOnly, true, "read-only whatever reaches it (validateImageMount refuses the request first)");
});

const IMAGE_ID = "sha256:" + "9".repeat(64);

t.test("the image id a volume was mounted from is found by its target in HostConfig.Mounts", async (t) => {
  const mounts = [
    { Type: "bind" as const, Source: "/host", Target: "/data" },
    { Type: "image" as const, Source: IMAGE_ID, Target: "/mnt/image-volume", ReadOnly: true },
  ];
  t.equal(imageRefOfMount(mounts, "/mnt/image-volume"), IMAGE_ID);
  t.equal(imageRefOfMount(mounts, "/data"), "", "a bind mount is no image volume");
  t.equal(imageRefOfMount(undefined, "/mnt/image-volume"), "");
});

t.test("ContainerStatus: an image volume's mount carries image_ref (ImageSpec tag 20), the id PullImage returned", async (t) => {
  const requested = [
    mount({ containerPath: "/mnt/image-volume", image: IMAGE_ID }),
    mount({ containerPath: "/etc-only", image: "registry.test/content:1", imageSubPath: "etc" }),
    { ...mount({ containerPath: "/host" }), image: "", hostPath: "/srv" },
  ];
  const info = containerInfo({
    Id: "c".repeat(64), Name: "/k8s_app_pod_ns_u1_0", Created: "2024-01-01T00:00:00Z", Image: IMAGE_ID,
    State: { Status: "created", Running: false, Paused: false, Restarting: false, OOMKilled: false, Dead: false, Pid: 0, ExitCode: 0, Error: "", StartedAt: "0001-01-01T00:00:00Z", FinishedAt: "0001-01-01T00:00:00Z" },
    Config: { Labels: { "io.kubernetes.docker.type": "container", "io.cridock.mounts": JSON.stringify(requested) } },
    HostConfig: {
      Binds: ["/srv:/host"],
      Mounts: [
        { Type: "image", Source: IMAGE_ID, Target: "/mnt/image-volume", ReadOnly: true },
        { Type: "image", Source: "sha256:" + "1".repeat(64), Target: "/etc-only", ReadOnly: true, ImageOptions: { Subpath: "etc" } },
      ],
    },
  } as unknown as ContainerInspect);
  const status = statusToCri(info);
  const type = criRoot().lookupType("runtime.v1.ContainerStatus");
  const wire = type.toObject(type.decode(type.encode(type.fromObject(status as never)).finish()), DECODE_OPTIONS) as {
    mounts: { containerPath: string; readonly: boolean; image?: { image: string; imageRef?: string }; imageSubPath?: string }[];
  };
  const byPath = new Map(wire.mounts.map((m) => [m.containerPath, m]));
  t.match(byPath.get("/mnt/image-volume")?.image, { image: IMAGE_ID, imageRef: IMAGE_ID }, "the image as asked and the id mounted");
  t.equal(byPath.get("/mnt/image-volume")?.readonly, true);
  t.equal(byPath.get("/etc-only")?.image?.image, "registry.test/content:1");
  t.equal(byPath.get("/etc-only")?.image?.imageRef, "sha256:" + "1".repeat(64));
  t.equal(byPath.get("/etc-only")?.imageSubPath, "etc");
  t.notOk(byPath.get("/host")?.image?.imageRef, "a host path has no image");
  // The field is tag 20 of ImageSpec, as cri-api v0.37 numbers it.
  t.equal(criRoot().lookupType("runtime.v1.ImageSpec").fields.imageRef?.id, 20);
});
