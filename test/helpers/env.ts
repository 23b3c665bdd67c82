/**
 * The test environment's contract: what scripts/env/setup.sh provides and
 * tests rely on. Registry addresses, test image names, the auth registry's
 * credentials, and a throwaway CNI configuration directory. Scripts import
 * the names from here too, so there is one place to change them.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The Docker engine the tests run against: CRIDOCK_TEST_DOCKER_ENDPOINT
 * (scripts/test.sh sets it per engine setup), by default the node's dockerd.
 * Every cridock a test starts gets it as --docker-endpoint, and the docker
 * CLI that tests and their helpers run follows it through DOCKER_HOST, set
 * here for this process and its children.
 */
export const TEST_DOCKER_ENDPOINT = process.env.CRIDOCK_TEST_DOCKER_ENDPOINT || "unix:///var/run/docker.sock";
if (!TEST_DOCKER_ENDPOINT.startsWith("unix:///")) {
  throw new Error(`CRIDOCK_TEST_DOCKER_ENDPOINT must be a unix:// socket, got "${TEST_DOCKER_ENDPOINT}"`);
}
/** The socket path of TEST_DOCKER_ENDPOINT, for raw Engine API requests. */
export const TEST_DOCKER_SOCKET = TEST_DOCKER_ENDPOINT.slice("unix://".length);
process.env.DOCKER_HOST = TEST_DOCKER_ENDPOINT;

/** Plain-HTTP registry started by env-setup (dockerd treats 127.0.0.0/8 as insecure). */
export const REGISTRY = "127.0.0.1:5000";
/** Registry that requires basic auth (user `cridock`, see authRegistry()). */
export const AUTH_REGISTRY = "127.0.0.1:5001";

/** Image pushed to REGISTRY and tagged locally as DEFAULT_PAUSE_IMAGE: a static pause (scripts/env/images/pause.ts) that exits 0 at once on SIGTERM/SIGINT and reaps orphans. */
export const PAUSE_IMAGE = `${REGISTRY}/cridock-test/pause:3.10`;
/**
 * cridock's default --pod-infra-container-image, the pause image kubeadm v1.36 and v1.37
 * deploys (`kubeadm config images list`); env-setup tags PAUSE_IMAGE with this
 * name so no pull is needed, and the mirror serves it for the kubeadm cluster.
 */
export const DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2";
/** busybox-static with every applet linked, users root/nobody(65534)/www-data(33), CMD ["sh"]. */
export const BUSYBOX_IMAGE = `${REGISTRY}/cridock-test/busybox:1.36`;
/**
 * BUSYBOX_IMAGE's userland plus Debian's curl (busybox's wget has no working
 * TLS): the cluster suite calls the API server from a pod with it. Only in
 * REGISTRY (the cluster's dockerd pulls it), never loaded into the engines.
 */
export const CURL_IMAGE = `${REGISTRY}/cridock-test/curl:1`;
/** busybox httpd in the foreground on port 80; prints a line containing "httpd" at start. */
export const HTTPD_IMAGE = `${REGISTRY}/cridock-test/httpd:2.4`;
/** BUSYBOX_IMAGE, pushed to the auth registry only: pulling it needs credentials. */
export const AUTH_BUSYBOX_IMAGE = `${AUTH_REGISTRY}/cridock-test/busybox:1.36`;

/**
 * Registry hosts whose images critest v1.36 pulls by name. env-setup serves
 * them from a local TLS registry (scripts/env/mirror.sh: /etc/hosts
 * entries, a CA in /etc/docker/certs.d/<host>/ca.crt); keep in step with
 * MIRROR_HOSTS in scripts/env/common.sh.
 */
export const MIRRORED_REGISTRIES = ["gcr.io", "registry.k8s.io", "k8s.gcr.io"] as const;

/** Where env-setup keeps its state (registry storage, image tarballs, credentials). */
export const ENV_STATE_DIR = "/var/lib/cridock-env";
export const AUTH_REGISTRY_FILE = join(ENV_STATE_DIR, "auth-registry.json");
/** The CA the mirror registry's certificate is signed with (what dockerd trusts for MIRRORED_REGISTRIES). */
export const MIRROR_CA_FILE = join(ENV_STATE_DIR, "mirror-tls/ca.crt");

/** Debian's containernetworking-plugins directory. */
export const CNI_BIN_DIR = "/usr/lib/cni";
/** Bridge, network name and subnet of the test CNI configuration (not the default cni0/10.88). */
export const TEST_CNI_BRIDGE = "cridock-t0";
export const TEST_CNI_NETWORK = "cridock-test";
export const TEST_CNI_SUBNET = "10.89.0.0/16";

/** The tools cache of the install scripts (CRIDOCK_TOOLS_DIR overrides, as for them). */
const TOOLS_DIR = process.env.CRIDOCK_TOOLS_DIR ?? "/var/cache/cridock-tools";
/** Where scripts/env/install-cri-tools.sh puts crictl and critest. */
export const CRI_TOOLS_BIN_DIR = join(TOOLS_DIR, "bin");
/**
 * The pinned versions of the test environment, from scripts/env/versions.env
 * (the one place they are set; NAME=value lines, # comments).
 */
export function pinnedVersions(text = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../../scripts/env/versions.env"), "utf8")): ReadonlyMap<string, string> {
  const pins = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^([A-Z][A-Z0-9_]*)=([^\s"'$`]+)$/.exec(line.trim());
    if (m) pins.set(m[1]!, m[2]!);
  }
  return pins;
}
function pin(name: string): string {
  const value = pinnedVersions().get(name);
  if (!value) throw new Error(`scripts/env/versions.env pins no ${name}`);
  return value;
}
/** The Kubernetes release the suites run (KUBERNETES_VERSION in scripts/env/versions.env, or the lane's CRIDOCK_KUBERNETES_VERSION), and where install-kubernetes.sh builds it. */
export const KUBERNETES_VERSION = process.env.CRIDOCK_KUBERNETES_VERSION || pin("KUBERNETES_VERSION");
export const KUBERNETES_BIN_DIR = join(TOOLS_DIR, "kubernetes", KUBERNETES_VERSION, "bin");
export const CRICTL = join(CRI_TOOLS_BIN_DIR, "crictl");
export const CRITEST = join(CRI_TOOLS_BIN_DIR, "critest");

export interface RegistryCredentials {
  address: string;
  username: string;
  password: string;
}

/** The auth registry's address and credentials, as env-setup wrote them. */
export async function authRegistry(): Promise<RegistryCredentials> {
  let text: string;
  try {
    text = await readFile(AUTH_REGISTRY_FILE, "utf8");
  } catch (err) {
    throw new Error(`${AUTH_REGISTRY_FILE} is missing: run scripts/env/setup.sh first`, { cause: err });
  }
  const parsed = JSON.parse(text) as Partial<RegistryCredentials>;
  if (typeof parsed.address !== "string" || typeof parsed.username !== "string" || typeof parsed.password !== "string") {
    throw new Error(`${AUTH_REGISTRY_FILE} does not hold {address, username, password}`);
  }
  return { address: parsed.address, username: parsed.username, password: parsed.password };
}

export interface CniConfDirOptions {
  bridge?: string;
  networkName?: string;
  subnet?: string;
}

export interface CniConfDir {
  /** Pass as --cni-conf-dir. */
  dir: string;
  networkName: string;
  bridge: string;
  subnet: string;
  /**
   * host-local's allocation directory, private to this conf dir so a test can
   * assert that no IP stays allocated: it holds one file per allocated IP
   * (plus host-local's own last_reserved_ip/lock files).
   */
  ipamDataDir: string;
  /** Removes the directory (not the bridge, which other runs may share). */
  cleanup(): Promise<void>;
}

/**
 * A temporary CNI conf dir: a bridge + host-local + portmap conflist and a
 * loopback conf. Tests run serially, so they may share the default bridge and
 * subnet; give a different subnet to run two at once.
 */
export async function makeCniConfDir(options: CniConfDirOptions = {}): Promise<CniConfDir> {
  const bridge = options.bridge ?? TEST_CNI_BRIDGE;
  const networkName = options.networkName ?? TEST_CNI_NETWORK;
  const subnet = options.subnet ?? TEST_CNI_SUBNET;
  const dir = await mkdtemp(join(tmpdir(), "cridock-cni-"));
  const ipamDataDir = join(dir, "ipam");
  await mkdir(ipamDataDir);
  const conflist = {
    cniVersion: "1.0.0",
    name: networkName,
    plugins: [
      {
        type: "bridge",
        bridge,
        isGateway: true,
        // No masquerade: test pods talk only to the host and to each other.
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: "host-local",
          ranges: [[{ subnet }]],
          routes: [{ dst: "0.0.0.0/0" }],
          dataDir: ipamDataDir,
        },
      },
      // dockerd sets the FORWARD policy to DROP; firewall admits the pods' traffic.
      { type: "firewall" },
      { type: "portmap", capabilities: { portMappings: true } },
    ],
  };
  const loopback = { cniVersion: "1.0.0", name: "lo", type: "loopback" };
  await writeFile(join(dir, `10-${networkName}.conflist`), JSON.stringify(conflist, null, 2) + "\n");
  await writeFile(join(dir, "99-loopback.conf"), JSON.stringify(loopback, null, 2) + "\n");
  return {
    dir,
    networkName,
    bridge,
    subnet,
    ipamDataDir,
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Flags that make a cridock child process use the test environment (pass to startCridockProcess). */
export function cridockTestFlags(cni: CniConfDir): string[] {
  return [
    `--pod-infra-container-image=${PAUSE_IMAGE}`,
    "--network-plugin=cni",
    `--cni-conf-dir=${cni.dir}`,
    `--cni-bin-dir=${CNI_BIN_DIR}`,
  ];
}

/**
 * Image-service test images (in REGISTRY): one per USER form, for the
 * uid/username conversion, three distinct images for ListImages, and one
 * image under three tags for remove-all-tags.
 */
export const USER_IMAGES = {
  uid: `${REGISTRY}/cridock-test/image-user-uid:1`,
  username: `${REGISTRY}/cridock-test/image-user-username:1`,
  uidGroup: `${REGISTRY}/cridock-test/image-user-uid-group:1`,
  usernameGroup: `${REGISTRY}/cridock-test/image-user-username-group:1`,
} as const;
export const LIST_IMAGES = [1, 2, 3].map((n) => `${REGISTRY}/cridock-test/image-list-${n}:1`);
export const MULTI_TAG_IMAGES = [1, 2, 3].map((n) => `${REGISTRY}/cridock-test/image-tags:${n}`);
/** An image of its own in AUTH_REGISTRY, so the auth tests may remove and re-pull it. */
export const AUTH_TEST_IMAGE = `${AUTH_REGISTRY}/cridock-test/image-auth:1`;
/** The image PullImage's integration test removes and re-pulls (no other test uses it). */
export const PULL_TEST_IMAGE = `${REGISTRY}/cridock-test/image-pull:1`;

/**
 * busybox with every applet and a user `app` (uid 2000, primary gid 2000)
 * whom the image's /etc/group also puts in groups 52000 and 52001, USER app:
 * what the supplemental groups policy is about (Merge adds 52000 and 52001,
 * Strict does not).
 */
export const GROUPS_IMAGE = `${REGISTRY}/cridock-test/groups:1`;
export const GROUPS_IMAGE_USER = { uid: 2000, gid: 2000, imageGroups: [52000, 52001] } as const;
/**
 * Content for image volumes: /content/hello.txt and /content/sub/inner.txt
 * (texts below), mounted by tests, never run.
 */
export const IMAGE_VOLUME_IMAGE = `${REGISTRY}/cridock-test/volume-content:1`;
export const IMAGE_VOLUME_FILES = { "/content/hello.txt": "hello from an image volume\n", "/content/sub/inner.txt": "inner file\n" } as const;

/**
 * The CDI test device the test engines' setup describes in /etc/cdi
 * (scripts/env/cdi.sh; keep in step): a device node with /dev/null's
 * numbers, a read-only mount and an environment variable.
 */
export const CDI_TEST_DEVICE = "cridock.test/null=null0";
export const CDI_TEST_EDITS = {
  deviceNode: "/dev/cridock-null",
  deviceNumbers: "1,3",
  mountedFile: "/cdi-content/hello.txt",
  mountedText: "cridock CDI test mount\n",
  env: "CRIDOCK_CDI_TEST=injected",
} as const;
