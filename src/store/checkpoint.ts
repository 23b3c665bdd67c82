/**
 * Atomic JSON checkpoints, one file per key in a directory: written to a temp
 * file, fsynced, renamed over the old file and the directory fsynced, so a
 * crash leaves either the old or the new content, never a torn file. The
 * store knows nothing of what it holds; callers validate what they read back.
 */
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { CridockError } from "../errors.ts";
import { setAside } from "../set-aside.ts";

const SUFFIX = ".json";
const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** A checkpoint file that exists but cannot be understood (callers may set it aside). */
export class CorruptCheckpointError extends CridockError {
  constructor(readonly path: string, cause: unknown) {
    super("INTERNAL", `checkpoint ${path} is corrupt`, { cause });
    this.name = "CorruptCheckpointError";
  }
}

export interface CheckpointEnvelope<T> {
  version: 1;
  data: T;
}

export class CheckpointStore<T> {
  private ready: Promise<void> | undefined;

  constructor(readonly directory: string) {}

  private ensureDir(): Promise<void> {
    this.ready ??= mkdir(this.directory, { recursive: true, mode: 0o700 }).then(() => undefined);
    return this.ready;
  }

  pathOf(key: string): string {
    if (!KEY_PATTERN.test(key)) throw new CridockError("INTERNAL", `checkpoint key "${key}" is not a safe file name`);
    return join(this.directory, key + SUFFIX);
  }

  async write(key: string, data: T): Promise<void> {
    await this.ensureDir();
    const target = this.pathOf(key);
    const temp = join(this.directory, `.${key}.${randomBytes(4).toString("hex")}.tmp`);
    const body = JSON.stringify({ version: 1, data } satisfies CheckpointEnvelope<T>, null, 2) + "\n";
    try {
      const handle = await open(temp, "wx", 0o600);
      try {
        await handle.writeFile(body);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, target);
      await this.syncDirectory();
    } catch (err) {
      await rm(temp, { force: true }).catch(() => undefined);
      throw new CridockError("INTERNAL", `writing checkpoint ${target}`, { cause: err });
    }
  }

  /** The checkpoint, undefined when absent; throws when it exists but is unreadable JSON. */
  async read(key: string): Promise<T | undefined> {
    let text: string;
    try {
      text = await readFile(this.pathOf(key), "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new CridockError("INTERNAL", `reading checkpoint ${this.pathOf(key)}`, { cause: err });
    }
    let parsed: Partial<CheckpointEnvelope<T>>;
    try {
      parsed = JSON.parse(text) as Partial<CheckpointEnvelope<T>>;
    } catch (err) {
      throw new CorruptCheckpointError(this.pathOf(key), err);
    }
    if (parsed.version !== 1 || parsed.data === undefined || parsed.data === null) {
      throw new CorruptCheckpointError(this.pathOf(key), "unknown format");
    }
    return parsed.data;
  }

  /** Moves KEY's file into `corrupt/` (set-aside.ts); returns its new path. */
  setAside(key: string): Promise<string> {
    return setAside(this.pathOf(key));
  }

  async remove(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /** Keys of every checkpoint in the directory (temp files left by a crash are removed). */
  async keys(): Promise<string[]> {
    await this.ensureDir();
    const names = await readdir(this.directory);
    const keys: string[] = [];
    for (const name of names) {
      if (name.startsWith(".") && name.endsWith(".tmp")) {
        await rm(join(this.directory, name), { force: true });
      } else if (name.endsWith(SUFFIX) && KEY_PATTERN.test(name.slice(0, -SUFFIX.length))) {
        keys.push(name.slice(0, -SUFFIX.length));
      }
    }
    return keys.sort();
  }

  private async syncDirectory(): Promise<void> {
    const dir = await open(this.directory, "r");
    try {
      await dir.sync();
    } catch {
      // Some filesystems refuse fsync on directories; the rename is still atomic.
    } finally {
      await dir.close();
    }
  }
}

/**
 * One string kept in a checkpoint of its own: KEY under DIRECTORY, stored
 * as `{ FIELD: value }`. Reading never fails: a value never saved, or not
 * readable, is undefined (the caller's next save replaces it).
 */
export class StoredString {
  private readonly store: CheckpointStore<Record<string, unknown>>;

  constructor(directory: string, private readonly key: string, private readonly field: string) {
    this.store = new CheckpointStore<Record<string, unknown>>(directory);
  }

  async load(): Promise<string | undefined> {
    try {
      const value = (await this.store.read(this.key))?.[this.field];
      return typeof value === "string" && value ? value : undefined;
    } catch {
      return undefined;
    }
  }

  async save(value: string): Promise<void> {
    await this.store.write(this.key, { [this.field]: value });
  }
}
