/**
 * What a `delete` that never reached the layer left under its rootfs
 * directory is released at cridock's start and every few minutes after:
 * only old directories of containers that no longer run, entry by entry
 * (nothing here is mounted, so release only removes them); others are
 * left alone. One container's failure is logged and counted, and the sweep
 * goes on.
 */
import t from "tap";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sweepRootfs } from "../../../src/oci/idmapped-rootfs.ts";
import { RootfsSweeper, rootfsSweepTotals } from "../../../src/oci/rootfs-sweeper.ts";
import type { Logger } from "../../../src/log.ts";

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
  t.same(released, { released: [stopped], failed: [] });
  t.notOk(existsSync(join(dir, stopped)), "the stopped container's directory is gone");
  t.ok(existsSync(join(dir, running, "m")), "a running container keeps its rootfs");
  t.ok(existsSync(join(dir, young, "m")), "a create under way keeps its rootfs");
  t.ok(existsSync(join(dir, "not-a-container")), "a name that is no container id is not touched");
  t.same(asked.sort(), [stopped, running].sort(), "Docker is asked only about old directories");
  t.same(await sweepRootfs(join(dir, "absent"), 0, async () => false), { released: [], failed: [] }, "no directory: nothing to do");
});

/** A logger that keeps what it was given. */
function recordingLog() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const make = (bound: Record<string, unknown>): Logger =>
    ({
      child: (fields: Record<string, unknown>) => make({ ...bound, ...fields }),
      info: (fields: Record<string, unknown>, msg: string) => lines.push({ level: "info", fields: { ...bound, ...fields }, msg }),
      warn: (fields: Record<string, unknown>, msg: string) => lines.push({ level: "warn", fields: { ...bound, ...fields }, msg }),
    }) as unknown as Logger;
  return { log: make({}), lines };
}

t.test("the periodic sweep goes on past a container it cannot release, logs each by id, and counts both", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cridock-rootfs-sweeper-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [stuck, gone, asking] = ["1", "2", "3"].map((c) => c.repeat(64)) as [string, string, string];
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const id of [stuck, gone, asking]) {
    mkdirSync(join(dir, id, "m"), { recursive: true });
    utimesSync(join(dir, id), hourAgo, hourAgo);
  }
  writeFileSync(join(dir, stuck, "m", "not ours"), "x"); // a release never removes recursively: this one fails
  const { log, lines } = recordingLog();
  const before = { ...rootfsSweepTotals };
  const sweeper = new RootfsSweeper({
    layer: async () => ({ runtime: "cridock", launcher: "/l", delegate: "runc", editsDir: "/e", rootfsDir: dir }),
    running: async (id) => {
      if (id === asking) throw new Error("dockerd said something odd");
      return false;
    },
    log,
    intervalMs: 3_600_000,
    ageMs: 60_000,
  });
  await sweeper.sweep();
  t.notOk(existsSync(join(dir, gone)), "the container past the failing one was released");
  t.ok(existsSync(join(dir, stuck, "m", "not ours")), "the stuck one is left as it is");
  t.ok(existsSync(join(dir, asking)), "one whose state Docker could not give is left too");
  t.equal(rootfsSweepTotals.released - before.released, 1);
  t.equal(rootfsSweepTotals.errors - before.errors, 2);
  const warnings = lines.filter((l) => l.level === "warn");
  t.same(warnings.map((w) => w.fields.containerId).sort(), [stuck, asking].sort(), "one structured line per container, naming it");
  t.ok(warnings.every((w) => w.fields.err instanceof Error && w.fields.component === "oci-rootfs-sweep"));
  t.match(lines.find((l) => l.level === "info"), { fields: { released: [gone] } });

  const link = join(dir, "link");
  symlinkSync(dir, link);
  const viaLink = new RootfsSweeper({
    layer: async () => ({ runtime: "cridock", launcher: "/l", delegate: "runc", editsDir: "/e", rootfsDir: link }),
    running: async () => false,
    log,
    ageMs: 0,
  });
  const errors = rootfsSweepTotals.errors;
  await viaLink.sweep();
  t.equal(rootfsSweepTotals.errors, errors + 1, "a rootfs directory that is a link is not swept: one error");
  t.ok(existsSync(join(dir, stuck)), "and nothing is removed through it");
  t.match(lines.at(-1), { level: "warn", fields: { rootfsDir: link }, msg: /could not sweep/ });

  const idle = new RootfsSweeper({ layer: async () => undefined, running: async () => t.fail("no layer, no question") as never, log });
  await idle.sweep();
  idle.start();
  idle.stop();
  t.pass("without a layer the sweep does nothing, and its timer stops");
});
