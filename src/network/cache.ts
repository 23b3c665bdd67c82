/**
 * The CNI result cache in --cni-cache-dir, laid out as libcni does
 * (results/<network>-<containerId>-<ifName>, kind cniCacheV1, the config
 * bytes base64-encoded) so DEL uses the same config and args as ADD did,
 * also after a restart or a change of the conf dir. The entry is written
 * before ADD (without a result) so an interrupted ADD can still be undone.
 * Entries are written to a temporary name and renamed; temporaries a killed
 * process left are swept at start-up.
 */
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";

export interface CacheEntry {
  kind: "cniCacheV1";
  containerId: string;
  ifName: string;
  networkName: string;
  /** base64 of the conf file's bytes. */
  config: string;
  cniArgs: [string, string][];
  capabilityArgs: Record<string, unknown>;
  netns: string;
  result: unknown;
}

const TEMPORARY = /^.+-.+-.+\.[0-9a-f]{8}\.tmp$/;

export class CniCache {
  /** Whether results/ was made (or found) by this process. */
  private resultsDirMade = false;

  constructor(readonly directory: string) {}

  private path(networkName: string, containerId: string, ifName: string): string {
    return join(this.directory, "results", `${networkName}-${containerId}-${ifName}`);
  }

  async write(entry: CacheEntry): Promise<void> {
    const target = this.path(entry.networkName, entry.containerId, entry.ifName);
    const temp = `${target}.${randomBytes(4).toString("hex")}.tmp`;
    const text = JSON.stringify(entry);
    // The directory is made at the first write, and again only when it went
    // missing: a pod's ADD writes four times (a burst of 110 pods made 440
    // mkdir calls, each a round of libuv's pool).
    if (!this.resultsDirMade) await this.makeResultsDir();
    try {
      await writeFile(temp, text, { mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      await this.makeResultsDir();
      await writeFile(temp, text, { mode: 0o600 });
    }
    await rename(temp, target);
  }

  private async makeResultsDir(): Promise<void> {
    await mkdir(join(this.directory, "results"), { recursive: true, mode: 0o700 });
    this.resultsDirMade = true;
  }

  async read(networkName: string, containerId: string, ifName: string): Promise<CacheEntry | undefined> {
    try {
      const parsed = JSON.parse(await readFile(this.path(networkName, containerId, ifName), "utf8")) as CacheEntry;
      return parsed.kind === "cniCacheV1" && typeof parsed.config === "string" ? parsed : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Removes temporaries (`<entry>.<8 hex>.tmp`, this class's names) last
   * modified before `before`: a writer renames its temporary within
   * milliseconds, so an older one belongs to a process that died. Returns
   * the names removed.
   */
  async sweepTemporaries(before: Date): Promise<string[]> {
    const dir = join(this.directory, "results");
    const names = await readdir(dir).catch(() => [] as string[]);
    const removed: string[] = [];
    for (const name of names) {
      if (!TEMPORARY.test(name)) continue;
      const info = await stat(join(dir, name)).catch(() => undefined);
      if (!info || info.mtimeMs >= before.getTime()) continue;
      await rm(join(dir, name), { force: true });
      removed.push(name);
    }
    return removed;
  }

  async remove(networkName: string, containerId: string, ifName: string): Promise<void> {
    await rm(this.path(networkName, containerId, ifName), { force: true });
  }
}
