/**
 * The images critest v1.36 and v1.37 hard-code (pkg/validate/consts.go,
 * security_context_linux.go, multi_container_linux.go, pkg/framework/util.go),
 * under their upstream names, each holding just the behaviour its specs
 * check. They are pushed to the mirror registry (scripts/env/mirror.sh),
 * which answers for those hosts here.
 *
 * Images the image specs pull and then remove by id get a label of their own,
 * so no two of them (nor any test image) share an id: removing one by id must
 * not take another image's tags with it. Names that denote one image in
 * critest (test-image-tags:1..3, pause:3.9 on both registries) share one.
 *
 * Not served: test-image-digest@sha256:9700f9a2…, whose manifest digest no
 * rebuild can reproduce (see test/conformance/skip.txt), and the win-* images.
 */
import type { ImageRunConfig } from "./docker-archive.ts";
import type { LayerEntry } from "./layer.ts";
import {
  binaryEntries,
  busyboxEntries,
  hostBinaryEntries,
  NGINX_BINARY,
  SHELL_BUSYBOX,
  STANDARD_GROUPS,
  STANDARD_USERS,
  userlandEntries,
} from "./rootfs.ts";

/** critest's `registry` constant. */
const CRI_TOOLS = "gcr.io/k8s-staging-cri-tools";
/** framework.DefaultRegistryE2ETestImagesPrefix. */
const E2E = "registry.k8s.io/e2e-test-images";
const GOARCH = process.arch === "x64" ? "amd64" : process.arch;

/** The default test container image (framework.DefaultLinuxContainerImage): a tag of the catalog's busybox. */
export const CRITEST_BUSYBOX = `${E2E}/busybox:1.29-2`;
/** Multiple Containers' httpd: a tag of the catalog's busybox httpd (port 80, logs a line with "httpd"). */
export const CRITEST_HTTPD = `${E2E}/httpd:2.4.39-4`;
/** webServerLinuxImage and the NamespaceOption specs' nginx: nginx on port 80, pid file /var/run/nginx.pid. */
export const CRITEST_NGINX = `${E2E}/nginx:1.14-2`;
/** hostNetWebServerLinuxImage: nginx on port 12003 (webServerHostNetContainerPort). */
export const CRITEST_HOSTNET_NGINX = `${CRI_TOOLS}/hostnet-nginx-${GOARCH}:latest`;
export const CRITEST_NONEWPRIVS = `${E2E}/nonewprivs:1.3`;

const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** What a critest image needs to be described: its names, its files and its config. */
export interface CritestImage {
  tags: string[];
  contents: () => LayerEntry[];
  config: ImageRunConfig;
  /** Pulled by the specs themselves, so kept only in the registry. */
  registryOnly: boolean;
}

const tinyShell = (): LayerEntry[] => [...busyboxEntries(["sh"]), ...userlandEntries()];

/**
 * Every busybox applet, as upstream's image-test (FROM busybox). critest
 * v1.37's Image Volume specs run `sh -c top` in test-image-tag:test and then
 * `ls`, `touch` and the volume's own /bin/ls through ExecSync.
 */
const fullBusybox = (): LayerEntry[] => [...busyboxEntries("all"), ...userlandEntries()];

/** A small sh image told apart by a label; the image specs pull, inspect and remove these. */
function labelled(tags: string[], name: string, extra: Partial<ImageRunConfig> = {}, contents: () => LayerEntry[] = tinyShell): CritestImage {
  return {
    tags,
    contents,
    config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/critest-image": name }, ...extra },
    registryOnly: true,
  };
}

/**
 * nginx as the upstream images run it: in the foreground as pid 1 (its title
 * then reads "nginx: master process ..."), its pid in /var/run/nginx.pid,
 * errors on stderr, a page at /.
 */
function nginxConfig(port: number): string {
  return `user www-data www-data;
worker_processes 1;
pid /var/run/nginx.pid;
error_log stderr notice;
events {
  worker_connections 64;
}
http {
  access_log /dev/stdout;
  server {
    listen ${port};
    root /usr/share/nginx/html;
    index index.html;
  }
}
`;
}

export function nginxImage(tags: string[], port: number): CritestImage {
  return {
    tags,
    contents: () => [
      ...busyboxEntries("all", SHELL_BUSYBOX),
      ...userlandEntries(),
      ...hostBinaryEntries(["/usr/bin/pgrep"]),
      ...binaryEntries(NGINX_BINARY, "/usr/sbin/nginx"),
      { kind: "file", path: "/etc/nginx/nginx.conf", content: nginxConfig(port) },
      { kind: "file", path: "/usr/share/nginx/html/index.html", content: `<html><body>cridock test nginx on ${port}</body></html>\n` },
      { kind: "dir", path: "/var/run" },
      { kind: "dir", path: "/run" },
      { kind: "dir", path: "/var/log/nginx" },
      { kind: "dir", path: "/var/lib/nginx" },
    ],
    config: {
      Entrypoint: ["nginx", "-g", "daemon off;"],
      Env: [PATH_ENV],
      ExposedPorts: { [`${port}/tcp`]: {} },
      StopSignal: "SIGQUIT",
    },
    registryOnly: false,
  };
}

/**
 * The no_new_privs check: the container runs as uid 1000 and prints the
 * effective uid of a setuid-root program. Without no_new_privs the kernel
 * honours the setuid bit ("Effective uid: 0"); with it, it does not
 * ("Effective uid: 1000"). busybox drops setuid for `id`, so the program is
 * coreutils' id.
 */
const NONEWPRIVS_SCRIPT = `#!/bin/sh
echo "Effective uid: $(/usr/bin/id -u)"
`;

/** The pause image of critest's same-image-two-registries specs: pid 1 waits, exits 0 on SIGTERM. */
const PAUSE_SCRIPT = `#!/bin/sh
trap 'exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $!
done
`;

export const CRITEST_IMAGES: CritestImage[] = [
  // Image Manager, Image Consistency, Image Identifier Consistency.
  // The Image Volume specs (critest v1.37) mount this one and run busybox applets beside and from it.
  labelled([`${CRI_TOOLS}/test-image-tag:test`], "test-image-tag:test", {}, fullBusybox),
  labelled([`${CRI_TOOLS}/test-image-tag:all`], "test-image-tag:all"),
  labelled([`${CRI_TOOLS}/test-image-latest:latest`], "test-image-latest"),
  ...[1, 2, 3].map((n) => labelled([`${CRI_TOOLS}/test-image-${n}:latest`], `test-image-${n}`)),
  labelled(
    [1, 2, 3].map((n) => `${CRI_TOOLS}/test-image-tags:${n}`),
    "test-image-tags",
  ),
  // ImageStatus's uid and username, from the image's USER.
  labelled([`${CRI_TOOLS}/test-image-user-uid:latest`], "test-image-user-uid", { User: "1002" }),
  labelled([`${CRI_TOOLS}/test-image-user-username:latest`], "test-image-user-username", { User: "www-data" }),
  labelled([`${CRI_TOOLS}/test-image-user-uid-group:latest`], "test-image-user-uid-group", { User: "1003:1004" }),
  labelled([`${CRI_TOOLS}/test-image-user-username-group:latest`], "test-image-user-username-group", { User: "www-data:1004" }),
  {
    tags: ["registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"],
    contents: () => [...busyboxEntries(["sh", "sleep"]), { kind: "file", path: "/pause", content: PAUSE_SCRIPT, mode: 0o755 }],
    config: { Entrypoint: ["/pause"], Env: [PATH_ENV], Labels: { "cridock.test/critest-image": "pause:3.9" } },
    registryOnly: true,
  },
  // SupplementalGroupsPolicy: default-user (1000) is a member of group-defined-in-image (50000) in /etc/group.
  {
    tags: [`${CRI_TOOLS}/test-image-predefined-group:latest`],
    contents: () => [
      ...busyboxEntries("all", SHELL_BUSYBOX),
      ...userlandEntries(
        [...STANDARD_USERS, { name: "default-user", uid: 1000, gid: 1000, home: "/home/default-user", shell: "/bin/sh" }],
        [...STANDARD_GROUPS, { name: "default-user", gid: 1000 }, { name: "group-defined-in-image", gid: 50000, members: ["default-user"] }],
      ),
    ],
    config: { Cmd: ["sh"], Env: [PATH_ENV], User: "default-user" },
    registryOnly: true,
  },
  nginxImage([CRITEST_NGINX], 80),
  nginxImage([CRITEST_HOSTNET_NGINX], 12003),
  {
    tags: [CRITEST_NONEWPRIVS],
    contents: () => [
      ...busyboxEntries(["sh"]),
      ...userlandEntries(),
      ...binaryEntries("/usr/bin/id", "/usr/bin/id", 0o4755),
      { kind: "file", path: "/nnp", content: NONEWPRIVS_SCRIPT, mode: 0o755 },
    ],
    config: { Entrypoint: ["/nnp"], Env: [PATH_ENV] },
    registryOnly: false,
  },
];
