/**
 * `cridock oci-edit` as the launcher runs it, a process of its own, fed
 * hostile arguments and files and killed with -9 at random moments. Every
 * run ends in exit 1 or 2 with one line saying why (never a crash, never a
 * stack trace), the bundle's config.json is the old spec or the new one and
 * never half of one, and nothing is made outside the directories given.
 * No dockerd is needed; the mounts of a pod's user namespace, and a kill in
 * the middle of them, are the VM node's (test/vm/pods.test.ts).
 */
import t from "tap";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

const CLI = join(REPO_ROOT, "bin/cridock.js");
const ID = "9".repeat(64);
const ROUNDS = Number(process.env.CRIDOCK_FUZZ_ROUNDS ?? 40);

const dir = mkdtempSync(join(tmpdir(), "cridock-oci-edit-faults-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
chmodSync(dir, 0o711);
const bundle = join(dir, "bundle");
mkdirSync(bundle);
const SPEC = JSON.stringify({ ociVersion: "1.2.0", process: { args: ["sh"] }, linux: { resources: {} } });
writeFileSync(join(bundle, "config.json"), SPEC, { mode: 0o600 });
const edits = join(dir, "edits");
mkdirSync(edits, { mode: 0o700 });
const good = join(edits, `${ID}.json`);
writeFileSync(good, JSON.stringify({ version: 1, unified: { "memory.oom.group": "1" } }), { mode: 0o600 });
const rootfs = join(dir, "rootfs");

function ociEdit(args: string[]) {
  return spawnSync(process.execPath, [CLI, "oci-edit", ...args], { encoding: "utf8", timeout: 60_000 });
}

function hostileFile(i: number): string {
  const path = join(edits, `${String(i % 10).repeat(64)}.json`);
  rmSync(path, { force: true });
  const kinds = [
    () => writeFileSync(path, randomBytes(64 + (i % 512)), { mode: 0o600 }),
    () => writeFileSync(path, JSON.stringify({ version: 1, userns: { uids: [{ containerId: 0, hostId: i, length: 65536 }], gids: [], join: false, idmapMounts: [] } }), { mode: 0o600 }),
    // Writable by others whatever the umask (writeFile's mode passes through it).
    () => (writeFileSync(path, '{"version":1,"unified":{"memory.max":"1"}}'), chmodSync(path, 0o666)),
    () => symlinkSync(good, path),
    () => writeFileSync(path, `{"version":1,"unified":{"${"x".repeat(i)}":"1"}}`, { mode: 0o600 }),
    () => writeFileSync(path, "", { mode: 0o600 }),
  ];
  kinds[i % kinds.length]!();
  return path;
}

const HOSTILE_ARGS = ["", "-", "--", "..", "../../etc/passwd", "/dev/null", "\u0000", "a".repeat(5000), "--release", "--bundle", "--id", "--nope", ID.slice(1), ID.toUpperCase()];

t.test("hostile arguments and files: exit 1 or 2 with a reason, the spec untouched", async (t) => {
  for (let i = 0; i < ROUNDS; i++) {
    const args =
      i % 3 === 0
        ? Array.from({ length: 1 + (i % 5) }, (_, k) => HOSTILE_ARGS[(i * 7 + k * 3) % HOSTILE_ARGS.length]!).filter((a) => !a.includes("\u0000"))
        : ["--bundle", bundle, "--edits", hostileFile(i), "--id", i % 2 ? ID : HOSTILE_ARGS[i % HOSTILE_ARGS.length]!.replace("\u0000", ""), "--rootfs-dir", rootfs];
    const r = ociEdit(args);
    t.ok(r.status === 1 || r.status === 2, `round ${i}: exit ${r.status}`);
    t.notMatch(r.stderr, /^\s+at /m, `round ${i}: a reason, not a stack trace`);
    t.match(r.stderr, /^cridock (oci-edit|OCI layer)/, `round ${i}: says who and why`);
    t.equal(readFileSync(join(bundle, "config.json"), "utf8"), SPEC, `round ${i}: config.json untouched`);
  }
  t.same(readdirSync(bundle), ["config.json"], "nothing else was written into the bundle");
});

t.test("killed with -9 at any moment: config.json is the old spec or the new one, never half", async (t) => {
  const rounds = Math.max(5, Math.floor(ROUNDS / 4));
  for (let i = 0; i < rounds; i++) {
    writeFileSync(join(bundle, "config.json"), SPEC, { mode: 0o600 });
    const child = spawn(process.execPath, [CLI, "oci-edit", "--bundle", bundle, "--edits", good], { stdio: "ignore" });
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    setTimeout(() => child.kill("SIGKILL"), 100 + ((i * 397) % 2400)); // from before Node is up to after the write
    await exited;
    const spec = JSON.parse(readFileSync(join(bundle, "config.json"), "utf8"));
    const unified = spec.linux.resources.unified;
    t.ok(unified === undefined || unified["memory.oom.group"] === "1", `round ${i}: whole, before or after the edit`);
    for (const name of readdirSync(bundle)) if (name !== "config.json") rmSync(join(bundle, name));
  }
});
