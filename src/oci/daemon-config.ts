/**
 * Registering a runtime in dockerd's daemon.json, as pure text → text
 * functions: the operator's other settings are kept as they are (the file
 * is rewritten as JSON, two-space indented, key order kept); only
 * `runtimes.<name>` is added, replaced or removed. A file that is not a
 * JSON object is refused, never overwritten.
 *
 * A `default-runtime` that names the layer is refused too, on add and on
 * remove: the launcher runs the real runtime it was given, which install
 * takes from dockerd's default runtime, so a default of `cridock` has the
 * launcher exec itself for ever; and removing the runtime dockerd's default
 * names leaves a dockerd that refuses the reload (or its next start).
 */

/** A change refused because of what daemon.json (or dockerd) says: the file is left as it is, and trying again changes nothing. */
export class RefusedChange extends Error {
  override name = "RefusedChange";
}

type DaemonConfig = Record<string, unknown> & { runtimes?: Record<string, unknown> };

function parse(text: string | undefined, path: string): DaemonConfig {
  if (text === undefined || text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new RefusedChange(`${path} is not JSON (${(err as Error).message}); fix it first: dockerd would not start with it either`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new RefusedChange(`${path} is not a JSON object`);
  const config = parsed as DaemonConfig;
  if (config.runtimes !== undefined && (!config.runtimes || typeof config.runtimes !== "object" || Array.isArray(config.runtimes))) {
    throw new RefusedChange(`${path}'s "runtimes" is not an object`);
  }
  return config;
}

function format(config: DaemonConfig): string {
  return JSON.stringify(config, null, 2) + "\n";
}

function refuseDefault(config: DaemonConfig, name: string, path: string): void {
  if (config["default-runtime"] === name) {
    throw new RefusedChange(
      `${path} makes "${name}" dockerd's default-runtime; cridock's layer must not be the default (its launcher would run itself): set "default-runtime" back to "runc" (or remove it) and run this again`,
    );
  }
}

/** The file with `runtimes.<name>` = { path }; undefined when it already says exactly that. */
export function withRuntime(text: string | undefined, name: string, launcher: string, path = "daemon.json"): string | undefined {
  const config = parse(text, path);
  refuseDefault(config, name, path);
  const current = config.runtimes?.[name];
  if (JSON.stringify(current) === JSON.stringify({ path: launcher })) return undefined;
  return format({ ...config, runtimes: { ...config.runtimes, [name]: { path: launcher } } });
}

/**
 * The file without `runtimes.<name>`; undefined when it has none. An emptied
 * `runtimes` stays, as `{}`: dockerd's reload replaces its runtimes only
 * when the key is there, so without it a SIGHUP keeps the removed runtime.
 */
export function withoutRuntime(text: string | undefined, name: string, path = "daemon.json"): string | undefined {
  const config = parse(text, path);
  if (!config.runtimes || !(name in config.runtimes)) return undefined;
  refuseDefault(config, name, path);
  const { [name]: _removed, ...others } = config.runtimes;
  return format({ ...config, runtimes: others });
}
