/**
 * The host side of a container in its pod's user namespace, made ready by
 * the runtime layer on `create`, under <rootfs dir>/<container id>/:
 *
 *   0, 1, …   each lower layer of the container's overlay, bind-mounted
 *             with the pod's idmapping (`mount -o X-mount.idmap`,
 *             util-linux 2.39 and newer), read-only, and detached again as
 *             soon as the overlay holds them;
 *   m         a new overlay over those and the container's own upper and
 *             work directories: the rootfs the container runs in;
 *   v0, v1, … each volume to idmap, bound the same way.
 *
 * So the image's files show their owners inside (root's files are the
 * pod's root's) without a file of the image chowned. The kernel refuses to
 * idmap an overlay as a whole, which is why the layers are mapped one by
 * one (overlayfs takes idmapped lower layers since Linux 5.19). The upper
 * layer cannot be idmapped: overlayfs makes its work directory with the
 * mounter's ids, host root's, which the mapping has no place for
 * (EOVERFLOW, and the overlay falls back to read-only). So the upper
 * directory, the container's own and empty until it writes, is given to
 * the pod's root, and what the container writes lands on disk with its
 * host ids, as under Docker's userns-remap.
 *
 * Where the mounts live, and who can reach them (docs/architecture.md):
 * - Never in the host's mount namespace. The launcher runs this step and the
 *   real runtime's `create` in a mount namespace of their own (util-linux
 *   `unshare --mount --propagation slave`; launcher.ts), which
 *   checkPrivateMountNamespace makes sure of before the first mount: the
 *   container's own namespace is cloned from it by runc, and when `create`
 *   exits (or fails, or this step is killed) the namespace and every mount
 *   in it go with the last process in it. Nothing is listed in the host's
 *   /proc/self/mountinfo, nothing propagates to the host (slave: the host's
 *   mounts still reach the container, as kubelet's HostToContainer expects).
 * - Directories as Docker's userns-remap makes its root: the rootfs
 *   directory root's 0711 (checked, layer-dirs.ts), each container's
 *   root:<pod root's host gid> 0710, so that the pod's root (runc's child
 *   resolves the rootfs path as that id, with no capability over root's
 *   directories) passes and no other host user does, and the lower layers'
 *   mount points root's 0700 (only this process mounts on them).
 * - Each lower bind is `ro`: the layers are shared by every container of the
 *   image, hostUsers: true and privileged ones included, and the pod's root
 *   owns their files through the mapping. `nodev` too. Not `nosuid`: the
 *   binds are detached before any process of the pod exists (the overlay
 *   keeps private clones of its layers), so the flag would guard no path
 *   anyone can reach, and it is not worth a doubt about setuid programs in
 *   the rootfs on some kernel.
 * - The overlay is `nodev`: device nodes an image ships are never usable
 *   (runc gives /dev its own tmpfs and binds of the host's nodes). Not
 *   `nosuid`: setuid programs in the image (su, ping, sudo) must work for
 *   the pod's users, as they do under containerd; inside the namespace they
 *   make the pod's root, an unprivileged id on the host, and a flag set here
 *   would be locked on for the container (a mount copied into a less
 *   privileged user namespace keeps its nosuid/nodev).
 * - Volumes get `ro` when the spec's mount is read-only, and neither
 *   `nodev` nor `nosuid`: kubelet's volumes carry neither under containerd
 *   or CRI-O, and both would be locked on for the pod (a hostPath of
 *   /dev/net/tun, a setuid tool an init container put in an emptyDir).
 *
 * Containers created by the launcher of format 2 had these mounts in the
 * host's namespace; release() still undoes them on their `delete`, and the
 * sweep (rootfs-sweeper.ts) when no delete comes.
 */
import { execFile } from "node:child_process";
import { lstat, mkdir, readdir, readFile, readlink, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { idmapMountOption, procMapMatches } from "./id-mappings.ts";
import { mountAt, mountContaining, mountsUnder, overlayLayers, parseMountinfo, type MountEntry } from "../mountinfo.ts";
import { bindMountsAt, type OciSpec, type PreparedUserns, type UsernsEdit } from "./spec-edits.ts";
import { checkLayerDir, ensureLayerDir, withDirectory } from "./layer-dirs.ts";

const CONTAINER_ID = /^[0-9a-f]{64}$/;
const MOUNT_TIMEOUT_MS = 30_000;
/** The mode of the rootfs directory: the pods' roots pass through, nobody lists it. */
export const ROOTFS_DIR_MODE = 0o711;
/** The mode of a container's directory, owned root:<pod root's host gid>: its pod's root passes, nobody else. */
export const CONTAINER_DIR_MODE = 0o710;

function run(command: string, args: string[], cwd?: string): Promise<void> {
  return new Promise((done, fail) => {
    execFile(command, args, { cwd, timeout: MOUNT_TIMEOUT_MS }, (err, _stdout, stderr) => {
      if (!err) return done();
      fail(new Error(`${command} ${args.join(" ")}: ${String(stderr).trim() || err.message}`));
    });
  });
}

export function containerDir(rootfsDir: string, id: string): string {
  if (!CONTAINER_ID.test(id)) throw new Error(`"${id.slice(0, 80)}" is not a full Docker container id`);
  return join(rootfsDir, id);
}

/**
 * Why mounts made now under `rootfsDir` would not stay in a namespace of
 * their own, or undefined: `own` and `outer` are the mount namespaces
 * (readlink of /proc/…/ns/mnt) of this process and of the process that ran
 * the launcher (containerd's shim), `mounts` this namespace's mountinfo.
 * The mount that holds `rootfsDir` must not be shared, or what is mounted
 * under it would propagate back to its peers, the host's /run among them.
 */
export function mountNamespaceProblem(own: string, outer: string | undefined, mounts: readonly MountEntry[], rootfsDir: string): string | undefined {
  if (!outer) return "the layer's launcher ran it without a mount namespace of its own (a launcher from before this cridock): run `cridock oci-layer install` again";
  if (!/^mnt:\[[0-9]+\]$/.test(own) || !/^mnt:\[[0-9]+\]$/.test(outer)) return `the mount namespaces ${JSON.stringify(own)} and ${JSON.stringify(outer)} are not what /proc shows`;
  if (own === outer) return `it runs in the mount namespace of the runtime's caller (${own}), where its mounts would be seen by every host user`;
  const holder = mountContaining(mounts, rootfsDir);
  if (!holder) return `no mount holds ${rootfsDir}`;
  if (holder.optional.split(" ").some((f) => f.startsWith("shared:"))) {
    return `the mount at ${holder.mountPoint} that holds ${rootfsDir} is shared (${holder.optional}) in this namespace, so mounts under it would propagate to the host`;
  }
  return undefined;
}

/** Refuses to mount unless this process runs in a mount namespace of its own whose mounts stay there (mountNamespaceProblem). */
export async function checkPrivateMountNamespace(outer: string | undefined, rootfsDir: string): Promise<void> {
  const [own, text] = await Promise.all([readlink("/proc/self/ns/mnt"), readFile("/proc/self/mountinfo", "utf8")]);
  const problem = mountNamespaceProblem(own, outer, parseMountinfo(text), rootfsDir);
  if (problem) throw new Error(`the idmapped rootfs is not made, since ${problem}`);
}

/** The sandbox's user namespace, found through the network namespace the container joins (Docker's `container:<sandbox>` mode). */
async function sandboxUserns(spec: OciSpec, edit: UsernsEdit): Promise<string> {
  const net = spec.linux?.namespaces?.find((ns) => ns.type === "network")?.path ?? "";
  const pid = /^\/proc\/([1-9][0-9]*)\/ns\/net$/.exec(net)?.[1];
  if (!pid) throw new Error(`the container does not join its pod's network namespace (${net || "a new one"}), so its pod's user namespace cannot be found`);
  const [uidMap, gidMap] = await Promise.all([readFile(`/proc/${pid}/uid_map`, "utf8"), readFile(`/proc/${pid}/gid_map`, "utf8")]).catch((err: unknown) => {
    throw new Error(`the pod's sandbox process ${pid} is gone: ${(err as Error).message}`);
  });
  if (!procMapMatches(uidMap, edit.uids) || !procMapMatches(gidMap, edit.gids)) {
    throw new Error(`the pod's sandbox process ${pid} is not in a user namespace with the pod's mappings (uid_map ${uidMap.trim().replace(/\s+/g, " ") || "empty"})`);
  }
  return `/proc/${pid}/ns/user`;
}

/** The pod's root is an unprivileged id on the host: every directory above the rootfs directory must let others pass. */
async function checkSearchable(dir: string): Promise<void> {
  for (let d = dir; ; d = dirname(d)) {
    const info = await lstat(d);
    if ((info.mode & 0o001) === 0) throw new Error(`${d} is not searchable by others (mode ${(info.mode & 0o777).toString(8)}), so a pod's root could not reach its rootfs under it: give the layer another --rootfs-dir`);
    if (d === "/") return;
  }
}

/** The host ids the pod's root (0 inside) stands for; the mappings always map 0 (id-mappings.ts). */
function hostIdsOfRoot(edit: UsernsEdit): { uid: number; gid: number } {
  const host = (list: UsernsEdit["uids"]) => list.find((e) => e.containerId === 0)?.hostId;
  const uid = host(edit.uids);
  const gid = host(edit.gids);
  if (uid === undefined || gid === undefined) throw new Error("the pod's mappings leave its root (id 0) unmapped");
  return { uid, gid };
}

/** A new mount point in the container's directory, which only root can write: no one can put a link in its place. */
async function mountPoint(source: string, target: string): Promise<void> {
  // stat, not lstat: Docker names its layers by their short symbolic links (overlay2/l/…).
  const info = await stat(source);
  if (info.isDirectory()) await mkdir(target, { mode: 0o700 });
  else await writeFile(target, "", { mode: 0o600, flag: "wx" });
}

async function bindIdmapped(source: string, target: string, options: string[]): Promise<void> {
  await mountPoint(source, target);
  await run("mount", ["--bind", "-o", options.join(","), source, target]);
}

/** Unmounts `point` (lazily when busy) and removes it: the overlay holds its layers by itself. */
async function detach(point: string): Promise<void> {
  await run("umount", [point]).catch(() => run("umount", ["-l", point]));
  await rmdir(point);
}

/**
 * Makes the idmapped rootfs and volumes of container `id` (its bundle's
 * `spec`, as Docker wrote it) and returns where they are; on any failure
 * undoes what it made and throws, so the container does not start.
 * `outerMntns` is the mount namespace of the launcher's caller: nothing is
 * mounted unless this process runs in another one whose mounts stay there.
 */
export async function prepareUserns(rootfsDir: string, id: string, bundle: string, spec: OciSpec, edit: UsernsEdit, outerMntns: string | undefined): Promise<PreparedUserns> {
  const dir = containerDir(rootfsDir, id);
  const rootOwner = hostIdsOfRoot(edit);
  await ensureLayerDir(rootfsDir, "the layer's rootfs directory", ROOTFS_DIR_MODE);
  await checkSearchable(dirname(rootfsDir));
  await checkPrivateMountNamespace(outerMntns, rootfsDir);
  const joinPath = edit.join ? await sandboxUserns(spec, edit) : undefined;
  const rootPath = resolve(bundle, spec.root?.path ?? "rootfs");
  const mounts = parseMountinfo(await readFile("/proc/self/mountinfo", "utf8"));
  const root = mountAt(mounts, rootPath);
  if (root?.fsType !== "overlay") throw new Error(`the container's rootfs ${rootPath} is ${root ? `a ${root.fsType} mount` : "not a mount"}, not an overlay: user namespaces need the overlay2 storage driver or containerd's overlayfs snapshotter`);
  const layers = overlayLayers(root.superOptions);
  for (const path of [layers.upper, layers.work]) {
    if (/[,:\\]/.test(path)) throw new Error(`the rootfs overlay's directory ${path} has a character an overlay option cannot carry`);
  }

  await release(rootfsDir, id); // what a create that never reached its delete left
  // mkdir never follows a link at its last component, and fails on anything already there.
  await mkdir(dir, { mode: 0o700 });
  const idmap = `X-mount.idmap=${idmapMountOption(edit)}`;
  try {
    await withDirectory(dir, async (d) => {
      await d.chown(0, rootOwner.gid);
      await d.chmod(CONTAINER_DIR_MODE);
    });
    const lowers = layers.lowers.map((_, i) => join(dir, String(i)));
    for (const [i, lower] of layers.lowers.entries()) await bindIdmapped(lower, lowers[i]!, ["ro", "nodev", idmap]);
    // The upper directory's root is the rootfs's root: the pod's root must own it to write there.
    const upper = await lstat(layers.upper);
    if (!upper.isDirectory()) throw new Error(`the rootfs overlay's upper directory ${layers.upper} is not a directory`);
    await withDirectory(layers.upper, (d) => d.chown(rootOwner.uid, rootOwner.gid));
    await mkdir(join(dir, "m"), { mode: 0o700 });
    // Lower layers by relative names, from the container's directory: the option string stays short for any number of layers.
    // index=off: Docker's own overlay uses the same upper and work directories.
    const lowerdir = layers.lowers.map((_, i) => String(i)).join(":");
    const overlay = `nodev,lowerdir=${lowerdir},upperdir=${layers.upper},workdir=${layers.work},index=off`;
    await run("mount", ["-t", "overlay", "overlay", "-o", overlay, "m"], dir);
    for (const lower of lowers) await detach(lower);
    const mountSources = new Map<number, string>();
    for (const index of bindMountsAt(spec, edit.idmapMounts)) {
      const mount = spec.mounts![index]!;
      if (!mount.source?.startsWith("/")) throw new Error(`volume ${mount.destination} has no host path to idmap`);
      const target = join(dir, `v${index}`);
      await bindIdmapped(mount.source, target, (mount.options ?? []).includes("ro") ? ["ro", idmap] : [idmap]);
      mountSources.set(index, target);
    }
    return { rootPath: join(dir, "m"), mountSources, joinPath };
  } catch (err) {
    await release(rootfsDir, id).catch(() => undefined);
    throw err;
  }
}

/**
 * Undoes prepareUserns for container `id`: unmounts everything under its
 * directory in this mount namespace, deepest first, then removes its
 * entries one by one. Nothing is ever removed recursively: an entry still
 * mounted (a busy unmount, or a mount of another namespace) fails its own
 * removal and is reported, and the layers under it are never touched. A
 * container without a directory is fine; a link in its place is refused.
 */
export async function release(rootfsDir: string, id: string): Promise<void> {
  const dir = containerDir(rootfsDir, id);
  const info = await lstat(dir).catch(() => undefined);
  if (!info) return;
  if (!info.isDirectory()) throw new Error(`${dir} is not a directory (a ${info.isSymbolicLink() ? "symbolic link" : "file"}): left alone`);
  const points = mountsUnder(parseMountinfo(await readFile("/proc/self/mountinfo", "utf8")), dir);
  for (const point of points) await run("umount", [point]).catch(() => run("umount", ["-l", point]));
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const entry = await lstat(path);
    await (entry.isDirectory() ? rmdir(path) : unlink(path));
  }
  await rmdir(dir);
}

/** What one sweep did: the containers released, and those it could not release with why. */
export interface SweepResult {
  released: string[];
  failed: { id: string; error: Error }[];
}

/**
 * Releases what a `delete` that never came left (dockerd or containerd
 * killed, a create killed before its runtime's cleanup, the machine's power
 * lost with /run kept): the directories older than `ageMs` whose container
 * is not running. Younger ones may belong to a create under way. One
 * container's failure is recorded and the sweep goes on to the next; a
 * rootfs directory that fails the layer's checks (layer-dirs.ts) is not
 * swept at all, and that is thrown.
 */
export async function sweepRootfs(rootfsDir: string, ageMs: number, running: (id: string) => Promise<boolean>, now = Date.now()): Promise<SweepResult> {
  const result: SweepResult = { released: [], failed: [] };
  if (!(await lstat(rootfsDir).then(() => true, () => false))) return result;
  // Never through a link, nor in a directory someone else could swap entries in.
  await checkLayerDir(rootfsDir, "the layer's rootfs directory");
  const names = await readdir(rootfsDir);
  for (const id of names) {
    if (!CONTAINER_ID.test(id)) continue;
    try {
      const info = await lstat(join(rootfsDir, id)).catch(() => undefined);
      if (!info || now - info.mtimeMs < ageMs || (await running(id))) continue;
      await release(rootfsDir, id);
      result.released.push(id);
    } catch (err) {
      result.failed.push({ id, error: err instanceof Error ? err : new Error(String(err)) });
    }
  }
  return result;
}
