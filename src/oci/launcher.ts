/**
 * The OCI runtime layer's launcher: the executable Docker runs in place of
 * runc for the containers cridock creates with the layer's runtime name
 * (daemon.json `runtimes`, registration.ts). It is a POSIX shell script,
 * not cridock itself, because containerd's shim calls the runtime for every
 * state, kill, delete and exec (each of kubelet's exec probes): those go to
 * the real runtime through one `exec`, at the cost of a shell's start. Only
 * a `create` or `restore` of a container for which cridock recorded spec
 * edits (edits-store.ts) starts cridock, as `cridock oci-edit`, which adds
 * them to the bundle's config.json (edit-command.ts); then the call goes on
 * to the real runtime unchanged. An edit that fails fails the call: the
 * container is never run without what was asked.
 *
 * A container in a pod's user namespace has its idmapped rootfs made by
 * that same step (idmapped-rootfs.ts, under the rootfs directory), and
 * undone by `cridock oci-edit --release` after the real runtime's `delete`:
 * the one other call that starts cridock, and only for a container that
 * has such a directory.
 *
 * The script is written by `cridock oci-layer install` with its settings
 * baked in (the real runtime, the edits and rootfs directories, the
 * command that runs cridock), so Docker needs no runtimeArgs, and cridock
 * reads the directories back from it (parseLauncher).
 */
/**
 * The OCI annotation on every container of a pod with its own user
 * namespace (runtime/pod-userns.ts sets it), and how it shows in the
 * bundle's config.json as Docker's Go encoder writes it (no spaces): its
 * value is fixed, so a fixed grep finds it.
 */
export const USERNS_ANNOTATION = "io.cridock.userns";
export const USERNS_ANNOTATION_VALUE = "pod";
const USERNS_MARK = `"${USERNS_ANNOTATION}":"${USERNS_ANNOTATION_VALUE}"`;

/** The first lines of every launcher; parseLauncher accepts nothing else. */
export const LAUNCHER_MARKER = "# cridock OCI runtime layer, launcher format 2";
/** Format 1 (no user namespaces) still carries out unified settings until the next install rewrites it. */
const LAUNCHER_MARKER_1 = "# cridock OCI runtime layer, launcher format 1";

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
  // runc's global options that take a value (the rest are flags); a value is never the subcommand.
  return `#!/bin/sh
${LAUNCHER_MARKER}
# Written by \`cridock oci-layer install\`; an install rewrites it. Docker runs it in
# place of runc. A create or restore of a container with spec edits recorded by
# cridock has them added to the bundle's config.json first; every call then goes
# on, unchanged, to the real runtime. A delete of a container with an idmapped
# rootfs (a pod's user namespace) has it undone after the real runtime's.
DELEGATE=${shellWord(settings.delegate)}
EDITS_DIR=${shellWord(settings.editsDir)}
ROOTFS_DIR=${shellWord(settings.rootfsDir)}

cmd= bundle= log= want= id=
for arg do
	if [ -n "$want" ]; then
		case $want in bundle) bundle=$arg ;; log) log=$arg ;; esac
		want=
		continue
	fi
	id=$arg
	if [ -z "$cmd" ]; then
		case $arg in
		--log) want=log ;;
		--log=*) log=\${arg#--log=} ;;
		--root | --log-format | --criu | --rootless) want=skip ;;
		-*) ;;
		*) cmd=$arg ;;
		esac
	else
		case $arg in
		--bundle | -b) want=bundle ;;
		--bundle=*) bundle=\${arg#--bundle=} ;;
		-b=*) bundle=\${arg#-b=} ;;
		esac
	fi
done

case $cmd in
create | restore)
	# Container ids are what Docker makes them: never a path.
	case $id in
	*/* | .* | '') ;;
	*)
		if [ -e "$EDITS_DIR/$id.json" ]; then
			${cridock} oci-edit --bundle "\${bundle:-.}" --edits "$EDITS_DIR/$id.json" --id "$id" --rootfs-dir "$ROOTFS_DIR" --log "$log" || exit 1
		elif grep -qF '${USERNS_MARK}' "\${bundle:-.}/config.json"; then
			# Never in the host's user namespace: a start without cridock's edits is refused.
			msg="cridock OCI layer: container $id belongs in its pod's user namespace and was started without cridock's spec edits; start it through cridock (crictl start), not docker"
			echo "$msg" >&2
			[ -z "$log" ] || printf '{"level":"error","msg":"%s"}\n' "$msg" >>"$log"
			exit 1
		fi
		;;
	esac
	;;
delete)
	case $id in
	*/* | .* | '') ;;
	*)
		if [ -d "$ROOTFS_DIR/$id" ]; then
			"$DELEGATE" "$@"
			status=$?
			${cridock} oci-edit --release --id "$id" --rootfs-dir "$ROOTFS_DIR" || [ "$status" -ne 0 ] || exit 1
			exit "$status"
		fi
		;;
	esac
	;;
esac
exec "$DELEGATE" "$@"
`;
}

/** The settings of a launcher cridock wrote, or undefined for any other file. */
export function parseLauncher(text: string): Pick<LauncherSettings, "delegate" | "editsDir" | "rootfsDir"> | undefined {
  const lines = text.split("\n");
  if (lines[0] !== "#!/bin/sh" || (lines[1] !== LAUNCHER_MARKER && lines[1] !== LAUNCHER_MARKER_1)) return undefined;
  const value = (name: string) => {
    const line = lines.find((l) => l.startsWith(`${name}='`));
    if (!line) return undefined;
    return line.slice(name.length + 2, -1).replaceAll(`'\\''`, "'");
  };
  const delegate = value("DELEGATE");
  const editsDir = value("EDITS_DIR");
  const rootfsDir = lines[1] === LAUNCHER_MARKER ? value("ROOTFS_DIR") : undefined;
  if (!delegate || !editsDir) return undefined;
  return rootfsDir ? { delegate, editsDir, rootfsDir } : { delegate, editsDir };
}
