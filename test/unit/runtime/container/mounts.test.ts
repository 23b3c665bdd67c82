// CRI mounts → Docker Binds or Mounts, decided by the engine's API version:
// readonly stays non-recursive on every engine, recursive read-only is
// asked for explicitly where the engine can do it and refused where not.
import t from "tap";
import { dockerMountsFor, validateMounts } from "../../../../src/runtime/container/mounts.ts";
import type { MountSpec } from "../../../../src/runtime/container/spec.ts";

const mount = (over: Partial<MountSpec> = {}): MountSpec => ({
  containerPath: "/data", hostPath: "/nonexistent-cridock-unit/data", readonly: false, selinuxRelabel: false,
  propagation: "private", recursiveReadOnly: false, image: "", imageSubPath: "", ...over,
});

t.test("engines before API 1.44 get Binds, whose ro is non-recursive there", async (t) => {
  const out = await dockerMountsFor([mount({ readonly: true }), mount({ containerPath: "/w", propagation: "host-to-container" })], "1.41", false);
  t.same(out.binds, ["/nonexistent-cridock-unit/data:/data:ro", "/nonexistent-cridock-unit/data:/w:rw,rslave"]);
  t.same(out.mounts, []);
  await t.rejects(dockerMountsFor([mount({ readonly: true, recursiveReadOnly: true })], "1.43", false), {
    code: "UNIMPLEMENTED",
    message: /API 1\.44; this engine speaks 1\.43/,
  });
});

t.test("API 1.44 and newer: Mount API binds that say which read-only is meant", async (t) => {
  const out = await dockerMountsFor(
    [mount({ readonly: true }), mount({ containerPath: "/rro", readonly: true, recursiveReadOnly: true }), mount({ containerPath: "/rw", propagation: "bidirectional" })],
    "1.47",
    false,
  );
  t.same(out.binds, []);
  t.same(out.mounts, [
    { Type: "bind", Source: "/nonexistent-cridock-unit/data", Target: "/data", ReadOnly: true, BindOptions: { CreateMountpoint: true, ReadOnlyNonRecursive: true } },
    { Type: "bind", Source: "/nonexistent-cridock-unit/data", Target: "/rro", ReadOnly: true, BindOptions: { CreateMountpoint: true, ReadOnlyForceRecursive: true } },
    { Type: "bind", Source: "/nonexistent-cridock-unit/data", Target: "/rw", ReadOnly: false, BindOptions: { Propagation: "rshared", CreateMountpoint: true } },
  ]);
});

t.test("SELinux relabelling stays a Bind (only Binds carry z) where the engine relabels", async (t) => {
  const out = await dockerMountsFor([mount({ selinuxRelabel: true, readonly: true })], "1.56", true);
  t.same(out.binds, ["/nonexistent-cridock-unit/data:/data:ro,z"]);
  t.same(out.mounts, []);
  const none = await dockerMountsFor([mount({ selinuxRelabel: true, readonly: true })], "1.56", false);
  t.same(none.binds, [], "an engine without SELinux support would ignore z: the mount keeps its exact read-only meaning");
  t.equal(none.mounts[0]?.BindOptions?.ReadOnlyNonRecursive, true);
  const old = await dockerMountsFor([mount({ selinuxRelabel: true, readonly: true })], "1.41", false);
  t.same(old.binds, ["/nonexistent-cridock-unit/data:/data:ro"]);
});

t.test("recursive read-only is checked before the engine is asked", async (t) => {
  t.throws(() => validateMounts([mount({ recursiveReadOnly: true })]), { code: "INVALID_ARGUMENT", message: /needs readonly/ });
  t.throws(() => validateMounts([mount({ readonly: true, recursiveReadOnly: true, propagation: "bidirectional" })]), { code: "INVALID_ARGUMENT", message: /private propagation/ });
  t.doesNotThrow(() => validateMounts([mount({ readonly: true, recursiveReadOnly: true })]), "valid RRO is left to the engine");
});

t.test("bind mount options: noexec, nodev and nosuid, each once; anything else names the option and the mount", async (t) => {
  t.doesNotThrow(() => validateMounts([mount({ mountOptions: ["noexec", "nodev", "nosuid"] }), mount({ containerPath: "/ro", readonly: true, propagation: "host-to-container", mountOptions: ["nosuid"] })]));
  t.doesNotThrow(() => validateMounts([mount({ mountOptions: [] })]), "none asked");
  const refused: [string[], RegExp][] = [
    [["exec"], /mount \/data: mount option "exec" is not one of noexec, nodev, nosuid/],
    [["noexec", "ro"], /mount \/data: mount option "ro" is not one of/],
    [["NOEXEC"], /"NOEXEC" is not one of/],
    [["noexec,nodev"], /"noexec,nodev" is not one of/],
    [[""], /"" is not one of/],
    [["nodev", "nodev"], /mount \/data: mount option "nodev" is given twice/],
  ];
  for (const [options, message] of refused) {
    t.throws(() => validateMounts([mount({ mountOptions: options })]), { code: "INVALID_ARGUMENT", message }, JSON.stringify(options));
  }
});

t.test("an image volume with bind mount options is INVALID_ARGUMENT, as kubelet's validation has it", async (t) => {
  t.throws(() => validateMounts([mount({ hostPath: "", image: "registry.example/data:1", mountOptions: ["noexec"] })]), {
    code: "INVALID_ARGUMENT",
    message: /image volume \/data \(registry\.example\/data:1\) has mount options noexec: image volumes take no bind mount options/,
  });
  t.doesNotThrow(() => validateMounts([mount({ hostPath: "", image: "registry.example/data:1" })]), "without options it is left to image-mounts.ts");
});

t.test("a missing host path is created as a directory before the container, as containerd does", async (t) => {
  const { mkdtemp, rm, stat, symlink, writeFile } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { createMissingHostPaths } = await import("../../../../src/runtime/container/mounts.ts");
  const dir = await mkdtemp(join(tmpdir(), "cridock-mounts-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const existing = join(dir, "existing-file");
  await writeFile(existing, "x");
  const missing = join(dir, "lib/modules");
  const created = await createMissingHostPaths([mount({ hostPath: existing }), mount({ hostPath: missing, containerPath: "/lib/modules" })]);
  t.same(created, [missing], "only the missing one");
  const s = await stat(missing);
  t.ok(s.isDirectory(), "created as a directory, parents too");
  t.equal(s.mode & 0o777, 0o755 & ~process.umask());
  t.ok((await stat(existing)).isFile(), "an existing file stays a file (single-file binds)");
  t.same(await createMissingHostPaths([mount({ hostPath: missing })]), [], "nothing to do the second time");
  await symlink(join(dir, "nowhere"), join(dir, "dangling"));
  t.same(await createMissingHostPaths([mount({ hostPath: join(existing, "below") })]), [], "below a file: not missing but wrong, left to Docker's refusal");
  await t.rejects(createMissingHostPaths([mount({ hostPath: join(dir, "dangling") })]), { code: "FAILED_PRECONDITION", message: /dangling.*cannot be created/ }, "a dangling symlink is refused");
});
