/**
 * The OCI runtime layer's launcher: the executable Docker runs in place of
 * runc for the containers cridock creates with the layer's runtime name
 * (daemon.json `runtimes`, registration.ts). It is a POSIX shell script,
 * not cridock itself, because containerd's shim calls the runtime for every
 * state, kill, delete and exec (each of kubelet's exec probes): those go to
 * the real runtime through one `exec`, at the cost of a shell's start. Only
 * a `create`, `run` or `restore` of a container for which cridock recorded
 * spec edits (edits-store.ts) starts cridock, as `cridock oci-edit`, which
 * adds them to the bundle's config.json (edit-command.ts); then the call
 * goes on to the real runtime unchanged. An edit that fails fails the call:
 * the container is never run without what was asked.
 *
 * A container in a pod's user namespace (its spec carries the userns mark,
 * runtime/pod-userns.ts) is created in a mount namespace of its own: the
 * launcher re-runs itself under util-linux's `unshare --mount --propagation
 * slave`, and `oci-edit` (which makes the idmapped rootfs there,
 * idmapped-rootfs.ts) and the real runtime's `create` run in it. runc clones
 * the container's own namespace from it; when `create` ends, however it
 * ends, the namespace goes with every mount in it, so no mount of the layer
 * is ever in the host's namespace or outlives its create. Slave, not
 * private: mounts the host makes later still reach the container
 * (kubelet's HostToContainer). Only such containers: a slave namespace in
 * between would cut the way back from a container to the host that
 * Bidirectional propagation needs, which only privileged pods may ask for,
 * and a pod in its own user namespace never is one.
 *
 * Fail closed, for any subcommand and any global flags before it: a spec
 * with the mark runs only through that path, with its edits; any other
 * subcommand given its bundle is refused. The mark is looked for with
 * every blank of config.json taken out, so no spelling of the JSON hides
 * it. A launcher that finds itself called again from its own real runtime
 * (dockerd's default runtime named cridock) refuses instead of looping.
 *
 * A marked create whose edit fails (or is killed) takes the container's
 * directory away at once, as a delete would: the real runtime never ran,
 * so nothing holds it, and no delete need come for a container that was
 * never made.
 *
 * On `delete`, after the real runtime's succeeded (never before: the
 * container may still exist), the container's directory is removed entry
 * by entry in the shell; cridock (`oci-edit --release`) is called only when
 * /proc/self/mountinfo still shows a mount under it, which only a container
 * created by the launcher of format 2 can have. A release that fails is
 * reported and left to cridock's sweep: the delete itself succeeded, and
 * containerd would retry a failed one forever. Nothing on the delete path
 * needs cridock's executable otherwise, so a removed package leaves no
 * container that cannot be deleted.
 *
 * The script is written by `cridock oci-layer install` with its settings
 * baked in (the real runtime, the edits and rootfs directories, the
 * command that runs cridock), so Docker needs no runtimeArgs, and cridock
 * reads the directories back from it (parseLauncher).
 */
import { mountinfoEscape } from "../mountinfo.ts";

/**
 * The OCI annotation on every container of a pod with its own user
 * namespace (runtime/pod-userns.ts sets it). The launcher looks for its key
 * followed by a colon in config.json with all blanks removed.
 */
export const USERNS_ANNOTATION = "io.cridock.userns";
export const USERNS_ANNOTATION_VALUE = "pod";
const USERNS_MARK = `"${USERNS_ANNOTATION}":`;

/** The first lines of every launcher; parseLauncher accepts nothing else. */
export const LAUNCHER_MARKER = "# cridock OCI runtime layer, launcher format 3";
/**
 * Older formats, read back until the next install rewrites them: 1 (no user
 * namespaces) still carries out unified settings; 2 made a pod's mounts in
 * the host's namespace (the cridock that reads it refuses such pods: its
 * oci-edit mounts only in a namespace of its own).
 */
const OLDER_MARKERS = ["# cridock OCI runtime layer, launcher format 1", "# cridock OCI runtime layer, launcher format 2"];

export interface LauncherSettings {
  /**
   * The real OCI runtime every call ends in: an absolute path, or a bare
   * command name (Docker's default, `runc`) that the launcher finds on the
   * PATH it is run with, containerd's shim's, at each call, as the shim
   * finds Docker's own runc. A name found once at install and baked in
   * outlives the engine: replaced by another (docker.io by Docker CE, whose
   * containerd brings its own runc), the layer ran the old runc, which
   * could not run the new engine's specs ("namespace time does not exist").
   */
  delegate: string;
  /** Where cridock leaves a container's spec edits, as <id>.json. */
  editsDir: string;
  /** Where the layer makes the idmapped rootfs of containers in a pod's user namespace (format 2). */
  rootfsDir?: string;
  /** The command that runs cridock (its executable; or node, its flags and the script). */
  cridock: readonly string[];
}

/** One shell word: single-quoted, a quote inside written as '\''. */
export function shellWord(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Whether `value` may be baked into the script: an absolute path of printable characters. */
function checkPath(what: string, value: string): void {
  if (!value.startsWith("/") || /[\0-\x1f\x7f]/.test(value)) throw new Error(`the layer's ${what} "${value}" must be an absolute path of printable characters`);
}

/** A command name the launcher may look up on its PATH: no slash, nothing a shell or a reader would trip on. */
export function isCommandName(value: string): boolean {
  return /^[A-Za-z0-9_][A-Za-z0-9._+-]*$/.test(value);
}

export function renderLauncher(settings: LauncherSettings): string {
  if (!isCommandName(settings.delegate)) checkPath("runtime", settings.delegate);
  checkPath("edits directory", settings.editsDir);
  if (!settings.rootfsDir) throw new Error("the layer needs its rootfs directory");
  checkPath("rootfs directory", settings.rootfsDir);
  if (settings.cridock.length === 0) throw new Error("the layer needs the command that runs cridock");
  checkPath("cridock command", settings.cridock[0]!);
  const cridock = settings.cridock.map(shellWord).join(" ");
  return `#!/bin/sh
${LAUNCHER_MARKER}
# Written by \`cridock oci-layer install\`; an install rewrites it. Docker runs it in
# place of runc. A create, run or restore of a container with spec edits recorded
# by cridock has them added to the bundle's config.json first; every call then
# goes on, unchanged, to the real runtime. A container marked for its pod's user
# namespace runs only with its edits, in a mount namespace of its own that takes
# every mount of its idmapped rootfs away when its create ends.
DELEGATE=${shellWord(settings.delegate)}
EDITS_DIR=${shellWord(settings.editsDir)}
ROOTFS_DIR=${shellWord(settings.rootfsDir)}
# ROOTFS_DIR as /proc/self/mountinfo writes it.
ROOTFS_DIR_MOUNTINFO=${shellWord(mountinfoEscape(settings.rootfsDir))}
CRIDOCK_EXE=${shellWord(settings.cridock[0]!)}

cmd= bundle= log= want= id=
for arg do
	if [ -n "$want" ]; then
		case $want in bundle) bundle=$arg ;; log) log=$arg ;; esac
		want=
		continue
	fi
	id=$arg
	if [ -z "$cmd" ]; then
		# runc's global options, in every form its flag parser takes (-x, --x, =value);
		# the value of one that takes a value is never the subcommand.
		case $arg in
		-log | --log) want=log ;;
		-log=* | --log=*) log=\${arg#*=} ;;
		-root | --root | -log-format | --log-format | -criu | --criu | -rootless | --rootless) want=skip ;;
		-*) ;;
		*) cmd=$arg ;;
		esac
	else
		case $arg in
		-b | --b | -bundle | --bundle) want=bundle ;;
		-b=* | --b=* | -bundle=* | --bundle=*) bundle=\${arg#*=} ;;
		esac
	fi
done

say() {
	echo "cridock OCI layer: $2" >&2
	[ -z "$log" ] || printf '{"level":"%s","msg":"cridock OCI layer: %s"}\\n' "$1" "$(printf '%s' "$2" | sed 's/[\\\\"]/\\\\&/g' | tr '\\n\\t' '  ')" >>"$log"
}
refuse() {
	say error "$1"
	exit 1
}

if [ -n "\${CRIDOCK_OCI_DELEGATED-}" ]; then
	refuse "the layer's real runtime ($DELEGATE) ran the layer again: it must be runc or another OCI runtime, never the layer (is dockerd's default runtime named cridock?); run \\\`cridock oci-layer install\\\` with --runtime"
fi

# The spec the call would run: create, run and restore take the working
# directory when given no bundle; so does a subcommand this launcher does not know.
case $cmd in
create | run | restore) config=\${bundle:-.}/config.json ;;
'' | checkpoint | delete | events | exec | features | help | h | kill | list | pause | ps | resume | spec | start | state | update) config=\${bundle:+$bundle/config.json} ;;
*) config=\${bundle:-.}/config.json ;;
esac
marked=
if [ -n "$config" ] && [ -f "$config" ] && tr -d ' \\t\\r\\n' <"$config" | grep -qF ${shellWord(USERNS_MARK)}; then
	marked=1
fi
# Container ids are what Docker makes them: never a path.
case $id in
*/* | .* | '') edits= ;;
*) edits=$EDITS_DIR/$id.json ;;
esac

delegate() {
	unset CRIDOCK_OCI_OUTER_MNTNS
	CRIDOCK_OCI_DELEGATED=1
	export CRIDOCK_OCI_DELEGATED
	exec "$DELEGATE" "$@"
}

# Whether this shell already runs in the mount namespace of its own that
# it re-ran itself in: the marker names its caller's namespace, and its own differs.
in_own_mntns() {
	[ -n "\${CRIDOCK_OCI_OUTER_MNTNS-}" ] || return 1
	own=$(readlink /proc/self/ns/mnt) && caller=$(readlink "/proc/$PPID/ns/mnt") && [ -n "$own" ] ||
		refuse "the mount namespaces of the layer and its caller cannot be read"
	[ "$CRIDOCK_OCI_OUTER_MNTNS" = "$caller" ] && [ "$own" != "$caller" ] ||
		refuse "container $id was to be created in a mount namespace of its own, and runs in $own (its caller's is $caller)"
}

release_dir() {
	dir=$ROOTFS_DIR/$id
	if grep -qF -e " $ROOTFS_DIR_MOUNTINFO/$id/" -e " $ROOTFS_DIR_MOUNTINFO/$id " /proc/self/mountinfo; then
		# Mounts in this namespace: a container created by the launcher of format 2.
		if [ ! -x "$CRIDOCK_EXE" ]; then
			say warning "container $id is deleted; its idmapped rootfs under $dir is still mounted and cridock ($CRIDOCK_EXE) is gone: unmount it by hand (umount -R)"
		elif ! ${cridock} oci-edit --release --id "$id" --rootfs-dir "$ROOTFS_DIR"; then
			say warning "container $id is deleted; its idmapped rootfs under $dir could not be released, and cridock's sweep will try again"
		fi
		return 0
	fi
	# Nothing mounted: the empty mount points create left, one by one, never recursively.
	for entry in "$dir"/*; do
		if [ -L "$entry" ]; then
			break
		elif [ -d "$entry" ]; then
			rmdir "$entry" 2>/dev/null || break
		elif [ -f "$entry" ] && [ ! -s "$entry" ]; then
			rm -f "$entry" || break
		fi
	done
	[ -L "$dir" ] || rmdir "$dir" 2>/dev/null ||
		say warning "container $id is deleted; $dir could not be removed (not empty, or not a directory), and cridock's sweep will try again"
}

case $cmd in
create | run | restore)
	if [ -n "$marked" ]; then
		[ -n "$edits" ] && [ -e "$edits" ] ||
			refuse "container $id belongs in its pod's user namespace and was started without cridock's spec edits; start it through cridock (crictl start), not docker"
		if ! in_own_mntns; then
			command -v unshare >/dev/null 2>&1 ||
				refuse "container $id needs a mount namespace of its own, and util-linux's unshare is not on the PATH ($PATH)"
			CRIDOCK_OCI_OUTER_MNTNS=$(readlink "/proc/$PPID/ns/mnt") && [ -n "$CRIDOCK_OCI_OUTER_MNTNS" ] ||
				refuse "the mount namespace of the layer's caller cannot be read"
			export CRIDOCK_OCI_OUTER_MNTNS
			exec unshare --mount --propagation slave /bin/sh "$0" "$@"
		fi
		if ! ${cridock} oci-edit --bundle "\${bundle:-.}" --edits "$edits" --id "$id" --rootfs-dir "$ROOTFS_DIR" --outer-mntns "$CRIDOCK_OCI_OUTER_MNTNS" --log "$log"; then
			# The real runtime never ran, so no container holds what the edit made of the
			# container's directory (an edit that failed, or was killed mid-way), and no
			# delete may ever come for it: take it away now, not at the sweep.
			if [ -e "$ROOTFS_DIR/$id" ] || [ -L "$ROOTFS_DIR/$id" ]; then
				release_dir
			fi
			exit 1
		fi
	elif [ -n "$edits" ] && [ -e "$edits" ]; then
		${cridock} oci-edit --bundle "\${bundle:-.}" --edits "$edits" --id "$id" --rootfs-dir "$ROOTFS_DIR" --log "$log" || exit 1
	fi
	;;
delete)
	if [ -n "$edits" ] && { [ -e "$ROOTFS_DIR/$id" ] || [ -L "$ROOTFS_DIR/$id" ]; }; then
		CRIDOCK_OCI_DELEGATED=1 "$DELEGATE" "$@"
		status=$?
		# Only once the container is gone: a failed delete leaves it, and its rootfs, as they are.
		[ "$status" -eq 0 ] || exit "$status"
		release_dir
		exit 0
	fi
	;;
*)
	[ -z "$marked" ] || refuse "container $id belongs in its pod's user namespace: runc $cmd with its bundle is refused"
	;;
esac
delegate "$@"
`;
}

/** The settings of a launcher cridock wrote, or undefined for any other file. */
export function parseLauncher(text: string): Pick<LauncherSettings, "delegate" | "editsDir" | "rootfsDir"> | undefined {
  const lines = text.split("\n");
  if (lines[0] !== "#!/bin/sh" || (lines[1] !== LAUNCHER_MARKER && !OLDER_MARKERS.includes(lines[1] ?? ""))) return undefined;
  const value = (name: string) => {
    const line = lines.find((l) => l.startsWith(`${name}='`));
    if (!line) return undefined;
    return line.slice(name.length + 2, -1).replaceAll(`'\\''`, "'");
  };
  const delegate = value("DELEGATE");
  const editsDir = value("EDITS_DIR");
  const rootfsDir = lines[1] === OLDER_MARKERS[0] ? undefined : value("ROOTFS_DIR");
  if (!delegate || !editsDir) return undefined;
  return rootfsDir ? { delegate, editsDir, rootfsDir } : { delegate, editsDir };
}
