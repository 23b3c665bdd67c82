/**
 * Layer contents taken from this host: Debian's busybox-static with its
 * applets as hard links, other Debian binaries together with the shared libraries
 * they load, and the small /etc files a minimal userland needs.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { ENV_STATE_DIR } from "../../../test/helpers/env.ts";
import type { LayerEntry } from "./layer.ts";

/** Where Debian's busybox-static installs the binary (usrmerge makes /usr/bin/busybox the same file). */
export const HOST_BUSYBOX = process.env.CRIDOCK_BUSYBOX ?? "/bin/busybox";

/**
 * Debian's (dynamically linked) busybox package, unpacked by
 * scripts/env/setup.sh without installing it (it conflicts with
 * busybox-static). busybox-static is built to run applets in-process before
 * searching PATH, so `sh -c ls` runs ls even when /bin/ls is masked;
 * critest's MaskedPaths spec needs a shell that executes /bin/ls, as the
 * official busybox image's does.
 */
export const SHELL_BUSYBOX = process.env.CRIDOCK_SHELL_BUSYBOX ?? join(ENV_STATE_DIR, "busybox-deb/bin/busybox");

/** Debian's nginx package, unpacked by scripts/env/setup.sh (not installed: no service on the host). */
export const NGINX_BINARY = process.env.CRIDOCK_NGINX ?? join(ENV_STATE_DIR, "nginx-deb/usr/sbin/nginx");

export interface PosixUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

export interface PosixGroup {
  name: string;
  gid: number;
  members?: string[];
}

/** The users every test image has: root, www-data (33) and nobody (65534), as in Debian and upstream busybox. */
export const STANDARD_USERS: PosixUser[] = [
  { name: "root", uid: 0, gid: 0, home: "/root", shell: "/bin/sh" },
  { name: "www-data", uid: 33, gid: 33, home: "/var/www", shell: "/bin/false" },
  { name: "nobody", uid: 65534, gid: 65534, home: "/nonexistent", shell: "/bin/false" },
];

export const STANDARD_GROUPS: PosixGroup[] = [
  { name: "root", gid: 0 },
  { name: "www-data", gid: 33 },
  { name: "nobody", gid: 65534 },
];

/**
 * /bin/busybox plus one hard link per applet, as the official busybox image
 * has them: critest masks /bin/ls, and with symlinks that mask lands on
 * busybox itself and takes sh with it. `applets: "all"` links what
 * `busybox --list-full` names (its own install layout: bin/, sbin/, usr/bin/,
 * usr/sbin/); otherwise only the named applets, under /bin.
 */
export function busyboxEntries(applets: "all" | string[], binary: string = HOST_BUSYBOX): LayerEntry[] {
  const entries: LayerEntry[] = [{ kind: "file", path: "/bin/busybox", content: readFileSync(binary), mode: 0o755 }];
  for (const library of sharedLibraries(binary)) {
    entries.push({ kind: "file", path: library, content: readFileSync(realpathSync(library)), mode: 0o755 });
  }
  const paths =
    applets === "all"
      ? execFileSync(binary, ["--list-full"], { encoding: "utf8" }).split("\n").filter((line) => line.trim() !== "")
      : applets.map((applet) => `bin/${applet}`);
  for (const path of paths) {
    if (path === "bin/busybox") continue;
    entries.push({ kind: "hardlink", path, target: "/bin/busybox" });
  }
  return entries;
}

/** The shared libraries (and the loader) a dynamically linked binary needs, as `ldd` resolves them here; none for a static one. */
export function sharedLibraries(binary: string): string[] {
  let output: string;
  try {
    output = execFileSync("ldd", [binary], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    if (/not a dynamic executable/.test(`${e.stdout ?? ""}${e.stderr ?? ""}`)) return [];
    throw new Error(`ldd ${binary} failed`, { cause: err });
  }
  const libraries: string[] = [];
  for (const line of output.split("\n")) {
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (m) libraries.push(m[1]!);
  }
  return libraries;
}

/**
 * Host binaries copied to the same paths in the image, each with the shared
 * libraries it loads (symlinks resolved, so the image holds plain files).
 * Used where Debian's busybox lacks an applet a test runs (pgrep, ipcs).
 * The binaries are read under `root`: "/" when building, a tree of
 * stand-ins in unit tests (which must not need the host's packages).
 */
export function hostBinaryEntries(binaries: string[], root = "/"): LayerEntry[] {
  const entries: LayerEntry[] = [];
  const seen = new Set<string>();
  const add = (path: string, source: string, mode: number) => {
    if (seen.has(path)) return;
    seen.add(path);
    entries.push({ kind: "file", path, content: readFileSync(realpathSync(source)), mode });
  };
  for (const binary of binaries) {
    const source = join(root, binary);
    add(binary, source, 0o755);
    for (const library of sharedLibraries(source)) add(library, library, 0o755);
  }
  return entries;
}

/**
 * One binary from `source` (a host path, or a file unpacked from a Debian
 * package) at `target` in the image, with the shared libraries it loads at
 * their host paths. `mode` lets a binary be setuid (0o4755).
 */
export function binaryEntries(source: string, target: string, mode = 0o755): LayerEntry[] {
  return [
    { kind: "file", path: target, content: readFileSync(realpathSync(source)), mode },
    ...sharedLibraries(source).map((library): LayerEntry => ({
      kind: "file",
      path: library,
      content: readFileSync(realpathSync(library)),
      mode: 0o755,
    })),
  ];
}

/** /etc/passwd, /etc/group and the directories a shell userland expects (a world-writable /tmp among them). */
export function userlandEntries(users: PosixUser[] = STANDARD_USERS, groups: PosixGroup[] = STANDARD_GROUPS): LayerEntry[] {
  const passwd = users.map((u) => `${u.name}:x:${u.uid}:${u.gid}:${u.name}:${u.home}:${u.shell}\n`).join("");
  const group = groups.map((g) => `${g.name}:x:${g.gid}:${(g.members ?? []).join(",")}\n`).join("");
  return [
    { kind: "file", path: "/etc/passwd", content: passwd },
    { kind: "file", path: "/etc/group", content: group },
    { kind: "dir", path: "/tmp", mode: 0o1777 },
    { kind: "dir", path: "/root", mode: 0o700 },
    { kind: "dir", path: "/proc" },
    { kind: "dir", path: "/sys" },
    { kind: "dir", path: "/dev" },
    { kind: "dir", path: "/var" },
  ];
}
