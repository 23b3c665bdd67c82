// The writable layer's directory read from a container's root mount, for the
// containerd image store, where Docker reports no GraphDriver data.
import t from "tap";
import { overlayUpperDir } from "../../src/stats/overlay-root.ts";

const SNAP = "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots";

t.test("the upperdir of the overlay at /", async (t) => {
  const mountinfo = [
    `812 640 0:123 / / rw,relatime master:1 - overlay overlay rw,lowerdir=${SNAP}/3/fs:${SNAP}/2/fs,upperdir=${SNAP}/41/fs,workdir=${SNAP}/41/work`,
    "813 812 0:125 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
  ].join("\n");
  t.equal(overlayUpperDir(mountinfo), `${SNAP}/41/fs`);
});

t.test("octal escapes in paths are undone", async (t) => {
  t.equal(overlayUpperDir("1 0 0:1 / / rw - overlay overlay rw,lowerdir=/a,upperdir=/x\\040y/fs,workdir=/w"), "/x y/fs");
});

t.test("no overlay root, no directory", async (t) => {
  t.equal(overlayUpperDir("1 0 8:1 / / rw,relatime - ext4 /dev/vda rw\n2 1 0:2 / /data rw - overlay overlay rw,upperdir=/u"), undefined);
  t.equal(overlayUpperDir(""), undefined);
  t.equal(overlayUpperDir("garbage line without separator"), undefined);
});
