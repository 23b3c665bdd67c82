/**
 * critest v1.37's Image Volume specs start `sh -c top` from
 * test-image-tag:test, mount the same image as a volume and run `ls`,
 * `touch` and the volume's own /bin/ls through ExecSync: the image carries
 * every busybox applet, as upstream's image-test (FROM busybox) does. The
 * host's busybox is replaced by a stand-in that lists a few applets, so the
 * check holds on a machine without busybox installed.
 */
import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const STAND_IN_BUSYBOX = `#!/bin/sh
case "$1" in
  --list-full) printf 'bin/sh\\nbin/ls\\nbin/touch\\nusr/bin/top\\n' ;;
esac
`;

t.test("test-image-tag:test has the applets the Image Volume specs run", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "critest-image-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const busybox = join(dir, "busybox");
  await writeFile(busybox, STAND_IN_BUSYBOX, { mode: 0o755 });
  // rootfs.ts reads the variable when it is first imported, hence the dynamic import after setting it.
  process.env.CRIDOCK_BUSYBOX = busybox;
  const { CRITEST_IMAGES } = await import("../../scripts/env/images/critest-images.ts");
  const image = CRITEST_IMAGES.find((i) => i.tags.includes("gcr.io/k8s-staging-cri-tools/test-image-tag:test"));
  t.ok(image, "in the catalog");
  const entries = new Map(image!.contents().map((e) => [e.path.replace(/^\//, ""), e]));
  for (const applet of ["bin/sh", "bin/ls", "bin/touch", "usr/bin/top"]) {
    const entry = entries.get(applet);
    t.equal(entry?.kind === "hardlink" ? entry.target : undefined, "/bin/busybox", `${applet} is busybox`);
  }
  // The other labelled images stay a shell alone: their specs only pull, list and remove them.
  const latest = CRITEST_IMAGES.find((i) => i.tags.includes("gcr.io/k8s-staging-cri-tools/test-image-latest:latest"));
  t.notOk(new Set(latest!.contents().map((e) => e.path)).has("bin/ls"));
});
