/**
 * The test images, as data. To add one, append an entry: its tags (those in
 * a local test registry or on a mirrored host are pushed there, any other tag
 * is only set in dockerd), what its single layer holds, and its run config.
 * Put the names tests use in test/helpers/env.ts and import them here; the
 * names critest hard-codes are in critest-images.ts.
 */
import {
  AUTH_BUSYBOX_IMAGE,
  AUTH_TEST_IMAGE,
  BUSYBOX_IMAGE,
  CURL_IMAGE,
  DEFAULT_PAUSE_IMAGE,
  GROUPS_IMAGE,
  GROUPS_IMAGE_USER,
  HTTPD_IMAGE,
  IMAGE_VOLUME_FILES,
  IMAGE_VOLUME_IMAGE,
  LIST_IMAGES,
  MULTI_TAG_IMAGES,
  PAUSE_IMAGE,
  PULL_TEST_IMAGE,
  USER_IMAGES,
} from "../../../test/helpers/env.ts";
import { CRITEST_BUSYBOX, CRITEST_HTTPD, CRITEST_IMAGES } from "./critest-images.ts";
import type { ImageRunConfig } from "./docker-archive.ts";
import type { LayerEntry } from "./layer.ts";
import { pauseEntries } from "./pause.ts";
import { busyboxEntries, hostBinaryEntries, SHELL_BUSYBOX, STANDARD_GROUPS, STANDARD_USERS, userlandEntries } from "./rootfs.ts";

export interface ImageSpec {
  /** Every reference the image gets; the first names it in messages. */
  tags: string[];
  /** The files of its one layer; called only when the catalog is built. */
  contents: () => LayerEntry[];
  config: ImageRunConfig;
  /**
   * Only in the registry: after the push the tags are removed from dockerd,
   * for tests that pull the image themselves and must find it absent first.
   */
  registryOnly?: boolean;
}

const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Debian's busybox has no pgrep and no ipcs applet; critest's default image
 * needs both, so the procps and util-linux binaries come along.
 */
const EXTRA_HOST_BINARIES = ["/usr/bin/pgrep", "/usr/bin/ipcs"];

/**
 * busybox with every applet, the standard users and the extra binaries: the
 * base of critest's default image and of httpd. Its busybox is the one that
 * looks commands up in PATH (see SHELL_BUSYBOX).
 */
export function fullUserland(): LayerEntry[] {
  return [...busyboxEntries("all", SHELL_BUSYBOX), ...userlandEntries(), ...hostBinaryEntries(EXTRA_HOST_BINARIES)];
}

/**
 * busybox httpd prints nothing when it starts, so the echo is the startup
 * line log tests look for. As pid 1 httpd would ignore SIGTERM (no handler),
 * so a shell stays pid 1 and passes the signal on.
 */
const HTTPD_START = `#!/bin/sh
echo "httpd: serving /var/www on port 80"
httpd -f -v -p 80 -h /var/www &
trap 'kill $! 2>/dev/null; exit 0' TERM INT
wait $!
`;

const HTTPD_INDEX = "<html><body>cridock test httpd</body></html>\n";

export const CATALOG: ImageSpec[] = [
  {
    // A static pause (pause.ts says why); DEFAULT_PAUSE_IMAGE is also the name kubeadm deploys.
    tags: [PAUSE_IMAGE, DEFAULT_PAUSE_IMAGE],
    contents: pauseEntries,
    config: { Entrypoint: ["/pause"], Env: [PATH_ENV], StopSignal: "SIGTERM" },
  },
  {
    tags: [BUSYBOX_IMAGE, AUTH_BUSYBOX_IMAGE, CRITEST_BUSYBOX],
    contents: fullUserland,
    config: { Cmd: ["sh"], Env: [PATH_ENV] },
  },
  {
    tags: [HTTPD_IMAGE, CRITEST_HTTPD],
    contents: () => [
      ...fullUserland(),
      { kind: "file", path: "/var/www/index.html", content: HTTPD_INDEX },
      { kind: "file", path: "/start-httpd", content: HTTPD_START, mode: 0o755 },
    ],
    config: {
      Cmd: ["/start-httpd"],
      Env: [PATH_ENV],
      ExposedPorts: { "80/tcp": {} },
    },
  },
];

/**
 * Image-service test images: small (sh only), told apart by their config.
 * Each is registry-only in spirit: the image tests pull and remove them.
 */
const tinyShell = () => [...busyboxEntries(["sh"]), ...userlandEntries()];
CATALOG.push(
  ...(
    [
      [USER_IMAGES.uid, "1002"],
      [USER_IMAGES.username, "www-data"],
      [USER_IMAGES.uidGroup, "1003:1004"],
      [USER_IMAGES.usernameGroup, "www-data:1004"],
    ] as const
  ).map(([tag, user]) => ({ tags: [tag], contents: tinyShell, config: { Cmd: ["sh"], Env: [PATH_ENV], User: user } })),
  ...LIST_IMAGES.map((tag, i) => ({
    tags: [tag],
    contents: tinyShell,
    config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/image": `list-${i + 1}` } },
  })),
  { tags: MULTI_TAG_IMAGES, contents: tinyShell, config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/image": "tags" } } },
  { tags: [PULL_TEST_IMAGE], contents: tinyShell, config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/image": "pull" } } },
  { tags: [AUTH_TEST_IMAGE], contents: tinyShell, config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/image": "auth" } } },
);

/** Supplemental groups policy: the user `app` is in two more groups by the image's /etc/group. */
const { uid: APP_UID, gid: APP_GID, imageGroups: APP_GROUPS } = GROUPS_IMAGE_USER;
CATALOG.push({
  tags: [GROUPS_IMAGE],
  contents: () => [
    ...busyboxEntries("all", SHELL_BUSYBOX),
    ...userlandEntries(
      [...STANDARD_USERS, { name: "app", uid: APP_UID, gid: APP_GID, home: "/", shell: "/bin/sh" }],
      [
        ...STANDARD_GROUPS,
        { name: "app", gid: APP_GID },
        ...APP_GROUPS.map((gid, i) => ({ name: `image-group-${i + 1}`, gid, members: ["app"] })),
      ],
    ),
  ],
  config: { Cmd: ["sh"], Env: [PATH_ENV], User: "app" },
});

/** Image volumes: files to find in the pod, never run. */
CATALOG.push({
  tags: [IMAGE_VOLUME_IMAGE],
  contents: () => [
    ...tinyShell(),
    ...Object.entries(IMAGE_VOLUME_FILES).map(([path, content]) => ({ kind: "file" as const, path, content })),
  ],
  config: { Cmd: ["sh"], Env: [PATH_ENV], Labels: { "cridock.test/image": "volume-content" } },
});

CATALOG.push({
  tags: [CURL_IMAGE],
  contents: () => [...fullUserland(), ...hostBinaryEntries(["/usr/bin/curl"])],
  config: { Cmd: ["sh"], Env: [PATH_ENV] },
  registryOnly: true,
});

CATALOG.push(...CRITEST_IMAGES);
