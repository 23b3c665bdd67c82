/**
 * `npm ci` installs only from package-lock.json and refuses a lock file that
 * lacks an entry for any dependency a locked package declares, optional
 * per-platform ones included (deno ships one package per platform): it failed
 * with "Missing: @deno/darwin-arm64@ from lock file". This checks what npm ci
 * checks, offline: every dependency of every locked package resolves to an
 * entry, the way Node resolves it (nested node_modules first, then upwards).
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  link?: boolean;
}

const lock = JSON.parse(readFileSync(fileURLToPath(new URL("../../../package-lock.json", import.meta.url)), "utf8")) as {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
};

/** The entry key a dependency `name` of the package at `from` resolves to, or undefined. */
function resolveFrom(from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const key = `${base ? `${base}/` : ""}node_modules/${name}`;
    if (lock.packages[key]) return key;
    if (!base) return undefined;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut < 0 ? "" : base.slice(0, cut);
  }
}

t.test("package-lock.json records every dependency npm ci will look for", async (t) => {
  t.equal(lock.lockfileVersion, 3);
  const missing: string[] = [];
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (entry.link) continue;
    const wanted = {
      ...entry.dependencies,
      ...entry.optionalDependencies,
      // The root's devDependencies are installed by npm ci; a dependency's are not.
      ...(key === "" ? entry.devDependencies : {}),
    };
    for (const name of Object.keys(wanted)) {
      if (!resolveFrom(key, name)) missing.push(`${name} (wanted by ${key || "the root"})`);
    }
  }
  t.same(missing, [], "no dependency is missing from the lock file");
});

t.test("deno's per-platform packages are all recorded, each for its own platform", async (t) => {
  const deno = lock.packages["node_modules/deno"];
  t.ok(deno?.optionalDependencies, "deno declares per-platform optional packages");
  for (const [name, version] of Object.entries(deno?.optionalDependencies ?? {})) {
    const entry = lock.packages[`node_modules/${name}`] as (LockEntry & { optional?: boolean; os?: string[]; cpu?: string[] }) | undefined;
    t.ok(entry, `${name} is in the lock file`);
    t.equal(entry?.version, version, `${name} at the version deno asks for`);
    t.equal(entry?.optional, true, `${name} is optional (skipped on other platforms)`);
    t.ok(entry?.os?.length && entry?.cpu?.length, `${name} names its os and cpu, so npm ci skips it elsewhere without fetching it`);
  }
});
