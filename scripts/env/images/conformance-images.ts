/**
 * The images Kubernetes' own e2e suites (e2e.test [Conformance], e2e_node.test
 * [NodeConformance]) pull, under the names of test/utils/image/manifest.go at
 * the version scripts/env/common.sh names, built here from the Go
 * programs scripts/env/install-kubernetes-tests.sh compiled and from Debian
 * binaries, each with what its upstream Dockerfile (test/images/<name>) gives
 * the specs: the entrypoint and command, the users and groups, the files at
 * the same paths and the tools the programs shell out to.
 *
 * Upstream's images sit on alpine (busybox) or debian-base; here the images'
 * busybox is Debian's dynamically linked one, which looks commands up in PATH,
 * except in the busybox image itself, and every tool a Debian binary supplies
 * is that binary with its libraries.
 *
 * Every image gets a label of its own: agnhost 2.55 must have an id other
 * than 2.66.1's (the rollout specs tell the two apart by it), and so must
 * any two names the suites treat as different images. `invalid.registry.k8s.io`
 * is never served (its spec expects the pull to fail), nor are images pinned
 * by digest (no rebuild reproduces their manifest digest).
 *
 * Every input comes from the environment scripts/env/conformance-images.sh sets.
 * They are registry-only: the node's own dockerd only carries them to the mirror.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { ImageSpec } from "./catalog.ts";
import type { ImageRunConfig } from "./docker-archive.ts";
import type { LayerEntry } from "./layer.ts";
import { nginxImage } from "./critest-images.ts";
import { binaryEntries, busyboxEntries, hostBinaryEntries, SHELL_BUSYBOX, STANDARD_GROUPS, STANDARD_USERS, userlandEntries } from "./rootfs.ts";

const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** framework's PromoterE2eRegistry. */
const E2E = "registry.k8s.io/e2e-test-images";

export interface ConformanceImageInputs {
  /** Holds agnhost, nonewprivs and sample-apiserver (install-kubernetes-tests.sh). */
  testBinDir: string;
  /** k8s.io/kubernetes at the suites' version, unpacked (the Go module cache): test/images/… files. */
  kubernetesSourceDir: string;
  /** Holds coredns, which agnhost and glibc-dns-testing carry at /coredns. */
  corednsBinDir: string;
  /** busybox built from upstream's source with its defconfig (conformance-images.sh says why). */
  upstreamBusybox: string;
  /** Debian's busybox, the shell of every other image (rootfs.ts SHELL_BUSYBOX, unpacked by env/setup.sh). */
  shellBusybox: string;
  /**
   * Where the Debian binaries the images carry (dig, bash, date, ...) are
   * read from: "/" when building; unit tests hand in a tree of stand-ins,
   * since they run before anything installs those packages.
   */
  hostRoot: string;
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: build the conformance images through scripts/env/conformance-images.sh`);
  return value;
}

export function conformanceInputsFromEnv(): ConformanceImageInputs {
  const inputs = {
    testBinDir: required("CRIDOCK_KUBERNETES_TEST_BIN_DIR"),
    kubernetesSourceDir: required("CRIDOCK_KUBERNETES_SOURCE_DIR"),
    corednsBinDir: required("CRIDOCK_COREDNS_BIN_DIR"),
    upstreamBusybox: required("CRIDOCK_UPSTREAM_BUSYBOX"),
    shellBusybox: SHELL_BUSYBOX,
    hostRoot: "/",
  };
  for (const [name, path] of [
    ["agnhost", join(inputs.testBinDir, "agnhost")],
    ["the kubernetes sources", join(inputs.kubernetesSourceDir, "test/images/agnhost/Dockerfile")],
    ["coredns", join(inputs.corednsBinDir, "coredns")],
    ["upstream busybox", inputs.upstreamBusybox],
  ] as const) {
    if (!existsSync(path)) throw new Error(`${name} is missing: ${path} does not exist`);
  }
  return inputs;
}

function executable(path: string, source: string, mode = 0o755): LayerEntry {
  return { kind: "file", path, content: readFileSync(source), mode };
}

/**
 * What agnhost's subcommands and the specs that exec into it run: dig and
 * nslookup (bind-tools), curl, nc (netcat-openbsd), ip and ss (iproute2),
 * iperf, bash and ipcs, as upstream's `apk add` line lists them; and getent,
 * which alpine's base image has (musl-utils) and the DNS specs' agnhost
 * querier runs (`getent hosts <name>`).
 */
export const AGNHOST_TOOLS = [
  "/usr/bin/getent",
  "/usr/bin/dig",
  "/usr/bin/nslookup",
  "/usr/bin/curl",
  "/usr/bin/nc",
  "/usr/sbin/ip",
  "/usr/bin/ss",
  "/usr/bin/iperf",
  "/usr/bin/ipcs",
];

/** agnhost's Dockerfile: user-defined-in-image (1000) is also in group-defined-in-image (50000). */
const AGNHOST_USERS = [...STANDARD_USERS, { name: "user-defined-in-image", uid: 1000, gid: 1000, home: "/home/user-defined-in-image", shell: "/bin/sh" }];
const AGNHOST_GROUPS = [
  ...STANDARD_GROUPS,
  { name: "user-defined-in-image", gid: 1000 },
  { name: "group-defined-in-image", gid: 50000, members: ["user-defined-in-image"] },
];

/** A busybox userland with every applet and the given host binaries over it. */
function shellWith(inputs: ConformanceImageInputs, tools: string[], users = STANDARD_USERS, groups = STANDARD_GROUPS): LayerEntry[] {
  return [...busyboxEntries("all", inputs.shellBusybox), ...userlandEntries(users, groups), ...hostBinaryEntries(tools, inputs.hostRoot)];
}

/**
 * The official busybox image: upstream's busybox, every applet a hard link
 * in /bin (specs run /bin/top, /bin/pidof) over its install layout (top is in
 * /usr/bin there) so that both paths work. Upstream's ash passes environment
 * entries whose names are no shell identifiers (envFrom keys such as
 * "data-1") on to what it runs, which the Secrets and ConfigMap "consumable
 * via the environment" specs print with `sh -c env`, and words its errors as
 * the read-only root filesystem spec expects ("/bin/sh: can't create /file:
 * Read-only file system"); Debian's busybox ash drops those entries. Its
 * defconfig has the applets Debian's lacks: nmeter, pgrep and ipcs.
 */
function busyboxImageEntries(busybox: string): LayerEntry[] {
  const installed = busyboxEntries("all", busybox);
  // Every applet in /bin as well: the names of the links busybox's own list placed.
  const applets = new Set(installed.flatMap((e) => (e.kind === "hardlink" ? [basename(e.path)] : [])));
  return [
    ...installed,
    ...userlandEntries(),
    ...[...applets].map((name): LayerEntry => ({ kind: "hardlink", path: `/bin/${name}`, target: "/bin/busybox" })),
  ];
}

/** coreutils' date, which prints fractions of a second (busybox's has no %N). */
const NMETER_DATE = "/usr/libexec/nmeter/date";

/**
 * Debian's busybox has no nmeter applet, and the container lifecycle specs
 * stamp their log lines with `nmeter -d0 '%3t' | head -n1` (the wall time to
 * the millisecond). This nmeter knows only that field, %[N]t; any other
 * field is an error rather than a wrong reading.
 */
const NMETER = `#!/bin/sh
delay=1000
while [ $# -gt 0 ]; do
  case "$1" in
    -d) delay="$2"; shift 2 ;;
    -d*) delay="\${1#-d}"; shift ;;
    *) break ;;
  esac
done
format="$1"
case "$format" in
  %t) digits=0 ;;
  %[1-6]t) digits="\${format#%}"; digits="\${digits%t}" ;;
  *) echo "nmeter: this image's nmeter prints only %[N]t (the time), not '$format'" >&2; exit 1 ;;
esac
while :; do
  now="$(${NMETER_DATE} +%H:%M:%S.%N)"
  if [ "$digits" = 0 ]; then echo "\${now%.*}"; else echo "\${now%.*}.$(echo "\${now#*.}" | cut -c1-"$digits")"; fi || exit 0
  if [ "$delay" -gt 0 ]; then usleep "$((delay * 1000))"; fi
done
`;

function agnhostEntries(inputs: ConformanceImageInputs): LayerEntry[] {
  const agnhostDir = join(inputs.kubernetesSourceDir, "test/images/agnhost");
  return [
    ...shellWith(inputs, AGNHOST_TOOLS, AGNHOST_USERS, AGNHOST_GROUPS),
    // bash where alpine's apk puts it, which is where scripts' #! lines look.
    ...hostBinaryEntries(["/usr/bin/bash"], inputs.hostRoot),
    { kind: "symlink", path: "/bin/bash", target: "/usr/bin/bash" },
    { kind: "symlink", path: "/usr/local/bin/iperf", target: "/usr/bin/iperf" },
    // Upstream's agnhost is alpine, whose busybox has nmeter: the container
    // lifecycle specs that update a container's image from busybox to agnhost
    // stamp the new container's log lines with it too.
    ...binaryEntries(join(inputs.hostRoot, "/usr/bin/date"), NMETER_DATE),
    { kind: "file", path: "/bin/nmeter", content: NMETER, mode: 0o755 },
    executable("/coredns", join(inputs.corednsBinDir, "coredns")),
    executable("/agnhost", join(inputs.testBinDir, "agnhost")),
    // The entrypoint-tester specs run the image with its entrypoint replaced by this name.
    { kind: "symlink", path: "/agnhost-2", target: "agnhost" },
    { kind: "dir", path: "/uploads" },
    { kind: "file", path: "/localhost.crt", content: readFileSync(join(agnhostDir, "porter/localhost.crt")) },
    { kind: "file", path: "/localhost.key", content: readFileSync(join(agnhostDir, "porter/localhost.key")) },
    { kind: "dir", path: "/home/user-defined-in-image" },
  ];
}

const AGNHOST_CONFIG: ImageRunConfig = {
  Entrypoint: ["/agnhost"],
  Cmd: ["pause"],
  Env: [PATH_ENV],
  ExposedPorts: { "80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {} },
};

function labelled(config: ImageRunConfig, name: string): ImageRunConfig {
  return { ...config, Labels: { ...(config.Labels ?? {}), "cridock.test/conformance-image": name } };
}

/**
 * Upstream's kitten and nautilus sit on agnhost, which sits on alpine 3.21;
 * the ImageVolume spec reads the volume's /etc/os-release and looks for
 * "Alpine Linux" in it (a file of the base layer, seen through the mount).
 * These images are not Alpine: the file says what they are and whose base
 * they stand in for.
 */
const PICTURE_OS_RELEASE = [
  'NAME="cridock conformance image"',
  "ID=cridock-conformance",
  'PRETTY_NAME="cridock conformance image, in place of the Alpine Linux 3.21 base of upstream\'s agnhost"',
  "",
].join("\n");

/** kitten and nautilus: agnhost serving a picture and data.json naming it from / (test-webserver). */
function pictureImage(inputs: ConformanceImageInputs, name: "kitten" | "nautilus", tag: string): ImageSpec {
  const html = join(inputs.kubernetesSourceDir, "test/images", name, "html");
  return {
    tags: [`${E2E}/${name}:${tag}`],
    contents: () => [
      ...agnhostEntries(inputs),
      { kind: "file", path: `/${name}.jpg`, content: readFileSync(join(html, `${name}.jpg`)) },
      { kind: "file", path: "/data.json", content: readFileSync(join(html, "data.json")) },
      { kind: "file", path: "/etc/os-release", content: Buffer.from(PICTURE_OS_RELEASE) },
    ],
    config: labelled({ ...AGNHOST_CONFIG, Cmd: ["test-webserver"] }, name),
    registryOnly: true,
  };
}

export function conformanceCatalog(inputs: ConformanceImageInputs): ImageSpec[] {
  const bin = (name: string) => join(inputs.testBinDir, name);
  const nginx = (tag: string): ImageSpec => {
    const image = nginxImage([`${E2E}/nginx:${tag}`], 80);
    return { ...image, config: labelled(image.config, `nginx:${tag}`), registryOnly: true };
  };
  return [
    { tags: [`${E2E}/agnhost:2.66.1`], contents: () => agnhostEntries(inputs), config: labelled(AGNHOST_CONFIG, "agnhost:2.66.1"), registryOnly: true },
    { tags: [`${E2E}/agnhost:2.55`], contents: () => agnhostEntries(inputs), config: labelled(AGNHOST_CONFIG, "agnhost:2.55"), registryOnly: true },
    {
      tags: [`${E2E}/busybox:1.37.0-2`],
      contents: () => busyboxImageEntries(inputs.upstreamBusybox),
      config: labelled({ Cmd: ["sh"], Env: [PATH_ENV] }, "busybox:1.37.0-2"),
      registryOnly: true,
    },
    nginx("1.27.0-2"),
    nginx("1.28.0-2"),
    {
      // nnp prints its effective uid; setuid root, so no_new_privs is what keeps it the caller's.
      tags: [`${E2E}/nonewprivs:1.4`],
      contents: () => [...shellWith(inputs, []), executable("/usr/local/bin/nnp", bin("nonewprivs"), 0o4755)],
      config: labelled({ Cmd: ["nnp"], Env: [PATH_ENV] }, "nonewprivs:1.4"),
      registryOnly: true,
    },
    {
      tags: [`${E2E}/nonroot:1.5`],
      contents: () => shellWith(inputs, []),
      config: labelled({ Cmd: ["sh"], Env: [PATH_ENV], User: "1234" }, "nonroot:1.5"),
      registryOnly: true,
    },
    pictureImage(inputs, "kitten", "1.8"),
    pictureImage(inputs, "nautilus", "1.8"),
    {
      // debian with dnsutils (glibc's resolver, not busybox's) and /coredns.
      tags: [`${E2E}/glibc-dns-testing:2.1.1`],
      contents: () => [
        ...shellWith(inputs, ["/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/getent"]),
        executable("/coredns", join(inputs.corednsBinDir, "coredns")),
      ],
      config: labelled({ Cmd: ["sh"], Env: [PATH_ENV] }, "glibc-dns-testing:2.1.1"),
      registryOnly: true,
    },
    {
      tags: [`${E2E}/sample-apiserver:1.29.2`],
      contents: () => [...shellWith(inputs, []), executable("/sample-apiserver", bin("sample-apiserver"))],
      config: labelled({ Entrypoint: ["/sample-apiserver"], Env: [PATH_ENV] }, "sample-apiserver:1.29.2"),
      registryOnly: true,
    },
  ];
}
