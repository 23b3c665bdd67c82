/**
 * Reading /proc/self/mountinfo (proc(5)): which mounts lie at or under a
 * path (the runtime layer's idmapped rootfs, the filesystem stats report),
 * and the layers of the overlay that is a container's rootfs. Docker's
 * overlay2 driver and containerd's overlayfs snapshotter both mount the
 * rootfs as an overlay before the runtime's `create`; its options are the
 * one place both name its directories.
 * Pure text → data functions.
 */

export interface MountEntry {
  mountPoint: string;
  fsType: string;
  source: string;
  superOptions: string;
  /** The optional fields (propagation: `shared:N`, `master:N`, `propagate_from:N`, `unbindable`), space-separated; "" for a private mount. */
  optional: string;
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescapeOctal(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    const dash = fields.indexOf("-");
    if (dash < 6 || fields.length < dash + 4) continue;
    out.push({
      mountPoint: unescapeOctal(fields[4]!),
      fsType: fields[dash + 1]!,
      source: unescapeOctal(fields[dash + 2]!),
      superOptions: fields.slice(dash + 3).join(" "),
      optional: fields.slice(6, dash).join(" "),
    });
  }
  return out;
}

/** The topmost mount at `path` (a later line is mounted over an earlier one), or undefined. */
export function mountAt(entries: readonly MountEntry[], path: string): MountEntry | undefined {
  for (let i = entries.length - 1; i >= 0; i--) if (entries[i]!.mountPoint === path) return entries[i];
  return undefined;
}

/** Mount points at or under `dir`, deepest and latest first: the order to unmount them in. */
export function mountsUnder(entries: readonly MountEntry[], dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const points = entries.map((e) => e.mountPoint).filter((p) => p === dir || p.startsWith(prefix));
  return points.reverse();
}

/** The mount `path` lies on: the latest of the deepest mount points at or above it. */
export function mountContaining(entries: readonly MountEntry[], path: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const e of entries) {
    const p = e.mountPoint;
    const above = p === "/" || path === p || path.startsWith(p.endsWith("/") ? p : `${p}/`);
    if (above && (!best || p.length >= best.mountPoint.length)) best = e;
  }
  return best;
}

/** mountinfo's form of a path (proc_show_mountinfo escapes space, tab, newline and backslash as \ooo), for a fixed-string match. */
export function mountinfoEscape(path: string): string {
  return path.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

export interface OverlayLayers {
  /** Lower directories, topmost first, as the overlay stacks them. */
  lowers: string[];
  upper: string;
  work: string;
}

/**
 * The directories of an overlay mount, from its super options. Options
 * are comma-separated; the kernel shows a comma, space or backslash inside
 * a path octal-escaped (seq_show_option). Kernels from 6.5 may show the
 * lower layers as repeated `lowerdir+` options; data-only layers (`::`,
 * `datadir+`) and relative paths (Docker's fallback for very long option
 * strings) are refused, since the layers could not be named again.
 */
export function overlayLayers(superOptions: string): OverlayLayers {
  const lowers: string[] = [];
  let upper = "";
  let work = "";
  for (const raw of superOptions.split(",")) {
    const eq = raw.indexOf("=");
    const key = eq < 0 ? raw : raw.slice(0, eq);
    const value = eq < 0 ? "" : unescapeOctal(raw.slice(eq + 1));
    if (key === "lowerdir") {
      if (value.includes("::")) throw new Error("the rootfs overlay has data-only lower layers, which cannot be idmapped one by one");
      lowers.push(...value.split(/(?<!\\):/).map((l) => l.replaceAll("\\:", ":")));
    } else if (key === "lowerdir+") lowers.push(value);
    else if (key === "datadir+") throw new Error("the rootfs overlay has data-only lower layers, which cannot be idmapped one by one");
    else if (key === "upperdir") upper = value;
    else if (key === "workdir") work = value;
  }
  if (lowers.length === 0) throw new Error("the rootfs overlay names no lower layer");
  if (!upper || !work) throw new Error("the rootfs overlay has no upper and work directory (a read-only overlay)");
  for (const path of [...lowers, upper, work]) {
    if (!path.startsWith("/")) throw new Error(`the rootfs overlay names the layer "${path}" relative to a directory it does not show (an image with very many layers)`);
  }
  return { lowers, upper, work };
}
