/**
 * scripts/k8s/conformance-results.ts: how a ginkgo JSON report of a Kubernetes
 * e2e suite becomes passed, failed, skipped and not-run specs, and the
 * conformance image catalog's names (manifest.go at v1.37.2).
 */
import t from "tap";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { classify, countOutcomes, specResults } from "../../scripts/k8s/conformance-results.ts";
import { AGNHOST_TOOLS, conformanceCatalog } from "../../scripts/env/images/conformance-images.ts";

t.test("a spec's state maps to one outcome", async (t) => {
  t.equal(classify({ State: "passed" }), "passed");
  for (const state of ["failed", "panicked", "interrupted", "aborted", "timedout"]) t.equal(classify({ State: state }), "failed", state);
  // Outside the focus: skipped by ginkgo before it ran.
  t.equal(classify({ State: "skipped", RunTime: 0 }), "not-run");
  // e2eskipper.Skipf: it ran, then skipped itself with a message.
  t.equal(classify({ State: "skipped", RunTime: 1200, Failure: { Message: "Only supported for node OS distro [gci ubuntu]" } }), "skipped");
  t.equal(classify({ State: "pending" }), "not-run");
});

t.test("specs are named by their containers and leaf; suite nodes count only when they fail", async (t) => {
  const results = specResults([
    {
      SuiteDescription: "E2eNode Suite",
      SpecReports: [
        { LeafNodeType: "SynchronizedBeforeSuite", State: "passed" },
        { ContainerHierarchyTexts: ["[sig-node] Pods", "when created"], LeafNodeText: "should be submitted [NodeConformance]", LeafNodeType: "It", State: "passed" },
        {
          ContainerHierarchyTexts: ["[sig-node] Summary API"],
          LeafNodeText: "should report resource usage",
          LeafNodeType: "It",
          State: "failed",
          RunTime: 5,
          Failure: { Message: "Timed out after 90s.\nExpected\n...", Location: { FileName: "summary_test.go", LineNumber: 341 } },
        },
        { ContainerHierarchyTexts: ["[sig-node] X"], LeafNodeText: "y", LeafNodeType: "It", State: "skipped" },
        { LeafNodeType: "SynchronizedAfterSuite", State: "failed", Failure: { Message: "teardown failed" } },
      ],
    },
  ]);
  t.same(
    results.map((r) => [r.outcome, r.name, r.detail]),
    [
      ["passed", "[sig-node] Pods when created should be submitted [NodeConformance]", ""],
      ["failed", "[sig-node] Summary API should report resource usage", "Timed out after 90s. (summary_test.go:341)"],
      ["not-run", "[sig-node] X y", ""],
      ["failed", "[SynchronizedAfterSuite] E2eNode Suite", "teardown failed"],
    ],
  );
  t.same(countOutcomes(results), { passed: 1, failed: 2, skipped: 0, "not-run": 1 });
});

t.test("the conformance images carry manifest.go's names, agnhost under both versions", async (t) => {
  const catalog = conformanceCatalog({
    testBinDir: "/nonexistent",
    kubernetesSourceDir: "/nonexistent",
    corednsBinDir: "/nonexistent",
    upstreamBusybox: "/nonexistent",
    shellBusybox: "/nonexistent",
    hostRoot: "/nonexistent",
  });
  const tags = catalog.flatMap((spec) => spec.tags);
  for (const name of [
    "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
    "registry.k8s.io/e2e-test-images/agnhost:2.55",
    "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
    "registry.k8s.io/e2e-test-images/nginx:1.27.0-2",
    "registry.k8s.io/e2e-test-images/nginx:1.28.0-2",
    "registry.k8s.io/e2e-test-images/nonewprivs:1.4",
    "registry.k8s.io/e2e-test-images/nonroot:1.5",
    "registry.k8s.io/e2e-test-images/kitten:1.8",
    "registry.k8s.io/e2e-test-images/nautilus:1.8",
  ]) {
    t.ok(tags.includes(name), name);
  }
  t.notOk(tags.some((tag) => tag.startsWith("invalid.registry.k8s.io/")), "the invalid registry's spec expects its pull to fail");
  // No two images may share an id: each carries a label of its own.
  const labels = catalog.map((spec) => JSON.stringify(spec.config.Labels ?? {}));
  t.equal(new Set(labels).size, catalog.length);
  t.ok(catalog.every((spec) => spec.registryOnly), "registry-only: the suites pull them");
});

/** A stand-in for upstream's busybox: it names a few applets, as `--list` and `--list-full` do. */
const STAND_IN_BUSYBOX = `#!/bin/sh
case "$1" in
  --list) printf 'sh\\nenv\\nnmeter\\npgrep\\n' ;;
  --list-full) printf 'bin/sh\\nusr/bin/env\\nusr/bin/nmeter\\nusr/bin/pgrep\\n' ;;
esac
`;

t.test("the busybox image is upstream's busybox, its shell too; agnhost has nmeter and getent", async (t) => {
  // agnhost's contents read the built programs and porter's certificate: stand-ins do.
  const dir = await mkdtemp(join(tmpdir(), "conformance-images-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const porter = join(dir, "src", "test/images/agnhost/porter");
  await mkdir(porter, { recursive: true });
  await mkdir(join(dir, "bin"));
  for (const file of [join(dir, "bin", "agnhost"), join(dir, "bin", "coredns"), join(porter, "localhost.crt"), join(porter, "localhost.key")]) {
    await writeFile(file, "stand-in\n");
  }
  const busybox = join(dir, "bin", "busybox");
  await writeFile(busybox, STAND_IN_BUSYBOX, { mode: 0o755 });
  // The Debian tools agnhost carries, as stand-ins: the unit suite runs on a
  // machine where nothing has installed their packages (bind9-dnsutils, iperf, ...).
  const host = join(dir, "host");
  for (const tool of [...AGNHOST_TOOLS, "/usr/bin/bash", "/usr/bin/date"]) {
    await mkdir(join(host, dirname(tool)), { recursive: true });
    await writeFile(join(host, tool), `#!/bin/sh\necho stand-in ${tool}\n`, { mode: 0o755 });
  }
  const catalog = conformanceCatalog({
    testBinDir: join(dir, "bin"),
    kubernetesSourceDir: join(dir, "src"),
    corednsBinDir: join(dir, "bin"),
    upstreamBusybox: busybox,
    shellBusybox: busybox,
    hostRoot: host,
  });
  const contents = (tag: string) => catalog.find((s) => s.tags.includes(`registry.k8s.io/e2e-test-images/${tag}`))!.contents();

  // The busybox image: the given busybox, with sh (the specs' `sh -c env`
  // and "/bin/sh: can't create /file") and nmeter among its applets, as in
  // the official image; no other shell and no stand-in nmeter.
  const image = contents("busybox:1.37.0-2");
  const byPath = new Map(image.map((e) => [e.path.replace(/^\//, ""), e]));
  t.same(byPath.get("bin/busybox"), { kind: "file", path: "/bin/busybox", content: Buffer.from(STAND_IN_BUSYBOX), mode: 0o755 });
  for (const applet of ["bin/sh", "bin/nmeter", "bin/pgrep", "usr/bin/nmeter"]) {
    const entry = byPath.get(applet);
    t.same(entry?.kind === "hardlink" && entry.target, "/bin/busybox", `${applet} is busybox`);
  }
  t.notOk(byPath.has("usr/bin/bash"), "no bash");
  t.notOk(byPath.has("usr/libexec/nmeter/date"), "no stand-in nmeter");

  // agnhost: upstream's is alpine, whose busybox has nmeter (the container
  // lifecycle specs stamp their logs with it); here a stand-in over coreutils' date.
  for (const tag of ["agnhost:2.66.1", "agnhost:2.55"]) {
    const paths = new Set(contents(tag).map((e) => e.path.replace(/^\//, "")));
    t.ok(paths.has("bin/nmeter"), `${tag} has /bin/nmeter`);
    t.ok(paths.has("usr/libexec/nmeter/date"), `${tag} has the date nmeter runs`);
    // The DNS specs' agnhost querier runs `getent hosts <name>` (alpine's base has it).
    t.ok(paths.has("usr/bin/getent"), `${tag} has getent`);
  }
});
