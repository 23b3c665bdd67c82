/**
 * The host side of a container in its pod's user namespace, made ready by
 * the runtime layer on `create` and undone on `delete`, under
 * <rootfs dir>/<container id>/:
 *
 *   0, 1, …   each lower layer of the container's overlay, bind-mounted
 *             with the pod's idmapping (`mount -o X-mount.idmap`,
 *             util-linux 2.39 and newer);
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
 * Everything is made in the mount namespace the runtime runs in (the
 * containerd shim's), which is why it is the layer's work and not
 * cridock's: a mount made by cridock.service could stay in its own
 * namespace. Directories are 0711: the container's root, an unprivileged
 * id on the host, must pass through them to reach its rootfs.
 */
import { execFile } from "node:child_process";
import { chmod, chown, lstat, mkdir, readdir, readFile, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { idmapMountOption, procMapMatches } from "./id-mappings.ts";
import { mountAt, mountsUnder, overlayLayers, parseMountinfo } from "../mountinfo.ts";
import { bindMountsAt, type OciSpec, type PreparedUserns, type UsernsEdit } from "./spec-edits.ts";

const CONTAINER_ID = /^[0-9a-f]{64}$/;
const MOUNT_TIMEOUT_MS = 30_000;

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

/** The pod's root is an unprivileged id on the host: every directory above its rootfs must let others pass. */
async function checkSearchable(dir: string): Promise<void> {
  for (let d = dir; ; d = dirname(d)) {
    const info = await lstat(d);
    if ((info.mode & 0o001) === 0) throw new Error(`${d} is not searchable by others (mode ${(info.mode & 0o777).toString(8)}), so a pod's root could not reach its rootfs under it: give the layer another --rootfs-dir`);
    if (d === "/") return;
  }
}

/** The host ids the pod's root (0 inside) stands for, or undefined when the mappings leave 0 out. */
function hostIdsOfRoot(edit: UsernsEdit): { uid: number; gid: number } | undefined {
  const host = (list: UsernsEdit["uids"]) => {
    const m = list.find((e) => e.containerId === 0);
    return m?.hostId;
  };
  const uid = host(edit.uids);
  const gid = host(edit.gids);
  return uid !== undefined && gid !== undefined ? { uid, gid } : undefined;
}

async function bindIdmapped(source: string, target: string, option: string): Promise<void> {
  // stat, not lstat: Docker names its layers by their short symbolic links (overlay2/l/…).
  const info = await stat(source);
  if (info.isDirectory()) await mkdir(target, { mode: 0o711 });
  else await writeFile(target, "", { mode: 0o600, flag: "wx" });
  await run("mount", ["--bind", "-o", `X-mount.idmap=${option}`, source, target]);
}

/**
 * Makes the idmapped rootfs and volumes of container `id` (its bundle's
 * `spec`, as Docker wrote it) and returns where they are; on any failure
 * undoes what it made and throws, so the container does not start.
 */
export async function prepareUserns(rootfsDir: string, id: string, bundle: string, spec: OciSpec, edit: UsernsEdit): Promise<PreparedUserns> {
  const dir = containerDir(rootfsDir, id);
  const joinPath = edit.join ? await sandboxUserns(spec, edit) : undefined;
  const rootPath = resolve(bundle, spec.root?.path ?? "rootfs");
  const mounts = parseMountinfo(await readFile("/proc/self/mountinfo", "utf8"));
  const root = mountAt(mounts, rootPath);
  if (root?.fsType !== "overlay") throw new Error(`the container's rootfs ${rootPath} is ${root ? `a ${root.fsType} mount` : "not a mount"}, not an overlay: user namespaces need the overlay2 storage driver or containerd's overlayfs snapshotter`);
  const layers = overlayLayers(root.superOptions);
  for (const path of [layers.upper, layers.work]) {
    if (/[,:\\]/.test(path)) throw new Error(`the rootfs overlay's directory ${path} has a character an overlay option cannot carry`);
  }
  const rootOwner = hostIdsOfRoot(edit);

  await mkdir(rootfsDir, { recursive: true, mode: 0o711 });
  await chmod(rootfsDir, 0o711);
  await checkSearchable(dirname(rootfsDir));
  await release(rootfsDir, id); // what a create that never reached its delete left
  await mkdir(dir, { mode: 0o711 });
  const option = idmapMountOption(edit);
  try {
    for (const [i, lower] of layers.lowers.entries()) await bindIdmapped(lower, join(dir, String(i)), option);
    // The upper directory's root is the rootfs's root: the pod's root must own it to write there.
    if (rootOwner) await chown(layers.upper, rootOwner.uid, rootOwner.gid);
    await mkdir(join(dir, "m"), { mode: 0o711 });
    // Lower layers by relative names, from the container's directory: the option string stays short for any number of layers.
    // index=off: Docker's own overlay uses the same upper and work directories.
    const lowerdir = layers.lowers.map((_, i) => String(i)).join(":");
    const overlay = `lowerdir=${lowerdir},upperdir=${layers.upper},workdir=${layers.work},index=off`;
    await run("mount", ["-t", "overlay", "overlay", "-o", overlay, "m"], dir);
    const mountSources = new Map<number, string>();
    for (const index of bindMountsAt(spec, edit.idmapMounts)) {
      const source = spec.mounts![index]!.source;
      if (!source?.startsWith("/")) throw new Error(`volume ${spec.mounts![index]!.destination} has no host path to idmap`);
      const target = join(dir, `v${index}`);
      await bindIdmapped(source, target, option);
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
 * directory, deepest first, then removes its entries one by one. Nothing
 * is ever removed recursively: an entry still mounted (a busy unmount)
 * fails its own removal and is reported, and the layers under it are
 * never touched. A container without a directory is fine.
 */
export async function release(rootfsDir: string, id: string): Promise<void> {
  const dir = containerDir(rootfsDir, id);
  if (!(await lstat(dir).then(() => true, () => false))) return;
  const points = mountsUnder(parseMountinfo(await readFile("/proc/self/mountinfo", "utf8")), dir);
  for (const point of points) await run("umount", [point]).catch(() => run("umount", ["-l", point]));
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const info = await lstat(path);
    await (info.isDirectory() ? rmdir(path) : unlink(path));
  }
  await rmdir(dir);
}

/**
 * At cridock's start: releases what a `delete` that never came left (dockerd
 * or containerd killed, the machine's power lost with /run kept): the
 * directories older than `ageMs` whose container is not running. Younger
 * ones may belong to a create under way. Returns the ids released.
 */
export async function sweepRootfs(rootfsDir: string, ageMs: number, running: (id: string) => Promise<boolean>, now = Date.now()): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(rootfsDir);
  } catch {
    return [];
  }
  const released: string[] = [];
  for (const id of names) {
    if (!CONTAINER_ID.test(id)) continue;
    const info = await lstat(join(rootfsDir, id)).catch(() => undefined);
    if (!info?.isDirectory() || now - info.mtimeMs < ageMs || (await running(id))) continue;
    await release(rootfsDir, id);
    released.push(id);
  }
  return released;
}
