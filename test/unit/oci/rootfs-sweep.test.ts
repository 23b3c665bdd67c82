/**
 * What a `delete` that never reached the layer left under its rootfs
 * directory is released at cridock's start: only old directories of
 * containers that no longer run, entry by entry (nothing here is mounted,
 * so release only removes them); others are left alone.
 */
import t from "tap";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sweepRootfs } from "../../../src/oci/idmapped-rootfs.ts";

t.test("old directories of stopped containers go; young ones, running ones and strangers stay", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cridock-rootfs-sweep-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [stopped, running, young] = ["a", "b", "c"].map((c) => c.repeat(64)) as [string, string, string];
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const id of [stopped, running, young]) {
    mkdirSync(join(dir, id, "0"), { recursive: true });
    mkdirSync(join(dir, id, "m"));
    writeFileSync(join(dir, id, "v3"), "");
    if (id !== young) utimesSync(join(dir, id), hourAgo, hourAgo);
  }
  mkdirSync(join(dir, "not-a-container"));
  utimesSync(join(dir, "not-a-container"), hourAgo, hourAgo);
  const asked: string[] = [];
  const released = await sweepRootfs(dir, 600_000, async (id) => {
    asked.push(id);
    return id === running;
  });
  t.same(released, [stopped]);
  t.notOk(existsSync(join(dir, stopped)), "the stopped container's directory is gone");
  t.ok(existsSync(join(dir, running, "m")), "a running container keeps its rootfs");
  t.ok(existsSync(join(dir, young, "m")), "a create under way keeps its rootfs");
  t.ok(existsSync(join(dir, "not-a-container")), "a name that is no container id is not touched");
  t.same(asked.sort(), [stopped, running].sort(), "Docker is asked only about old directories");
  t.same(await sweepRootfs(join(dir, "absent"), 0, async () => false), [], "no directory: nothing to do");
});
