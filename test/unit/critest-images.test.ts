/**
 * The mirror registry's contract: every image name critest v1.36 hard-codes
 * is in the catalog, every such name is on a host the environment serves,
 * the bash and TypeScript host lists agree, and no two images the image
 * specs remove by id could share an id.
 */
import t from "tap";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { CRITEST_IMAGES } from "../../scripts/env/images/critest-images.ts";
import { CATALOG } from "../../scripts/env/images/catalog.ts";
import { MIRRORED_REGISTRIES } from "../helpers/env.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const ARCH = process.arch === "x64" ? "amd64" : process.arch;

/** The names in cri-tools v1.36.0 pkg/validate/consts.go, security_context_linux.go, multi_container_linux.go and pkg/framework/util.go (Linux). */
const CRITEST_NAMES = [
  "gcr.io/k8s-staging-cri-tools/test-image-tag:test",
  "gcr.io/k8s-staging-cri-tools/test-image-tag:all",
  "gcr.io/k8s-staging-cri-tools/test-image-latest:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-1:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-2:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-3:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-tags:1",
  "gcr.io/k8s-staging-cri-tools/test-image-tags:2",
  "gcr.io/k8s-staging-cri-tools/test-image-tags:3",
  "gcr.io/k8s-staging-cri-tools/test-image-user-uid:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-user-username:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-user-uid-group:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-user-username-group:latest",
  "gcr.io/k8s-staging-cri-tools/test-image-predefined-group:latest",
  `gcr.io/k8s-staging-cri-tools/hostnet-nginx-${ARCH}:latest`,
  "registry.k8s.io/pause:3.9",
  "k8s.gcr.io/pause:3.9",
  "registry.k8s.io/e2e-test-images/busybox:1.29-2",
  "registry.k8s.io/e2e-test-images/nginx:1.14-2",
  "registry.k8s.io/e2e-test-images/httpd:2.4.39-4",
  "registry.k8s.io/e2e-test-images/nonewprivs:1.3",
];

t.test("every image name critest hard-codes is built", async (t) => {
  const tags = new Set(CATALOG.flatMap((spec) => spec.tags));
  for (const name of CRITEST_NAMES) t.ok(tags.has(name), name);
});

t.test("every critest image is on a mirrored host", async (t) => {
  for (const tag of CRITEST_IMAGES.flatMap((image) => image.tags)) {
    t.ok((MIRRORED_REGISTRIES as readonly string[]).includes(tag.slice(0, tag.indexOf("/"))), tag);
  }
});

t.test("the bash and TypeScript lists of mirrored hosts agree", async (t) => {
  const common = await readFile(`${REPO}scripts/env/common.sh`, "utf8");
  const m = /^MIRROR_HOSTS=\(([^)]*)\)/m.exec(common);
  t.ok(m, "env/common.sh defines MIRROR_HOSTS");
  t.same(m![1]!.trim().split(/\s+/), [...MIRRORED_REGISTRIES]);
});

t.test("images the specs pull and remove by id have configs of their own", async (t) => {
  const pulled = CRITEST_IMAGES.filter((image) => image.registryOnly);
  const configs = pulled.map((image) => JSON.stringify(image.config));
  t.equal(new Set(configs).size, configs.length, "no two registry-only critest images share a config");
  const catalogConfigs = new Set(CATALOG.filter((spec) => !CRITEST_IMAGES.includes(spec as never)).map((s) => JSON.stringify(s.config)));
  for (const [i, config] of configs.entries()) t.notOk(catalogConfigs.has(config), `${pulled[i]!.tags[0]} differs from every test image`);
});
