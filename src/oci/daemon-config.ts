/**
 * Registering a runtime in dockerd's daemon.json, as pure text → text
 * functions: the operator's other settings are kept as they are (the file
 * is rewritten as JSON, two-space indented, key order kept); only
 * `runtimes.<name>` is added, replaced or removed. A file that is not a
 * JSON object is refused, never overwritten.
 */

type DaemonConfig = Record<string, unknown> & { runtimes?: Record<string, unknown> };

function parse(text: string | undefined, path: string): DaemonConfig {
  if (text === undefined || text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path} is not JSON (${(err as Error).message}); fix it first: dockerd would not start with it either`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error(`${path} is not a JSON object`);
  const config = parsed as DaemonConfig;
  if (config.runtimes !== undefined && (!config.runtimes || typeof config.runtimes !== "object" || Array.isArray(config.runtimes))) {
    throw new Error(`${path}'s "runtimes" is not an object`);
  }
  return config;
}

function format(config: DaemonConfig): string {
  return JSON.stringify(config, null, 2) + "\n";
}

/** The file with `runtimes.<name>` = { path }; undefined when it already says exactly that. */
export function withRuntime(text: string | undefined, name: string, launcher: string, path = "daemon.json"): string | undefined {
  const config = parse(text, path);
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
  const { [name]: _removed, ...others } = config.runtimes;
  return format({ ...config, runtimes: others });
}
