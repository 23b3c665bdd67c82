// Start-up after a reboot: the boot id tells it (store/boot.ts), and
// recovery then stops every sandbox the reboot ended, so the CNI plugins'
// reservations on disk are released without waiting for kubelet; a corrupt
// checkpoint is set aside, not deleted. A fake Docker and a recording pod
// network stand in for dockerd and the plugins (the VM's reboot test,
// test/vm-lifecycle/reboot.test.ts, does it for real).
import t, { type Test } from "tap";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { recoverSandboxes } from "../../../../src/runtime/sandbox/recovery.ts";
import type { SandboxRecord } from "../../../../src/runtime/sandbox/record.ts";
import type { PodNetwork, PodNetworkRequest } from "../../../../src/network/plugin.ts";
import { bootedSince, BootStore, currentBootId } from "../../../../src/store/boot.ts";
import { CheckpointStore } from "../../../../src/store/checkpoint.ts";
import { SET_ASIDE_DIR as CORRUPT_DIR } from "../../../../src/set-aside.ts";
import { createLogger } from "../../../../src/log.ts";
import { sandboxSpec, scratchSandboxManager } from "../../../helpers/sandbox-fixtures.ts";

const ID = "a".repeat(64);
const STOPPED_ID = "b".repeat(64);

t.test("bootedSince: only a recorded id that differs from a known current one", async (t) => {
  t.equal(bootedSince(undefined, "x"), false, "a first run stops nothing");
  t.equal(bootedSince("x", ""), false, "an unknown current boot stops nothing");
  t.equal(bootedSince("x", "x"), false, "the same boot: a restart of cridock alone");
  t.equal(bootedSince("x", "y"), true, "another boot");
});

t.test("BootStore keeps the id; currentBootId reads the kernel's file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-boot-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = new BootStore(dir);
  t.equal(await store.load(), undefined, "nothing recorded yet");
  await store.save("1c6f");
  t.equal(await new BootStore(dir).load(), "1c6f", "read back by another instance");
  await writeFile(join(dir, "boot_id"), "5e2d-77\n");
  t.equal(await currentBootId(join(dir, "boot_id")), "5e2d-77");
  t.equal(await currentBootId(join(dir, "missing")), "", "no such file: unknown");
});

function record(id: string, phase: SandboxRecord["phase"], network: SandboxRecord["network"]["phase"], netnsPath: string): SandboxRecord {
  return {
    id,
    spec: sandboxSpec(),
    createdAt: "1700000000000000000",
    phase,
    hostNetwork: false,
    networkKind: "cni",
    netnsPath,
    network: { phase: network, name: "cridock", ips: network === "attached" ? ["10.88.0.7"] : [], result: {} },
  };
}

/** A sandbox manager over a fake Docker (every pause container exited) and a pod network that records its DELs. */
async function setUp(t: Test) {
  const deleted: PodNetworkRequest[] = [];
  const network = {
    kind: "cni",
    setUp: async () => {
      throw new Error("no ADD in recovery");
    },
    tearDown: async (request: PodNetworkRequest) => {
      deleted.push(request);
      return [];
    },
  } as unknown as PodNetwork;
  const stopped: string[] = [];
  const docker = {
    listContainers: async () => [],
    stopContainer: async (id: string) => void stopped.push(id),
  };
  const dir = await mkdtemp(join(tmpdir(), "cridock-recovery-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = new CheckpointStore<SandboxRecord>(join(dir, "sandbox"));
  // After a reboot the handle is a plain file: its mount went with the old kernel.
  const handle = join(dir, "netns-handle");
  await writeFile(handle, "");
  await store.write(ID, record(ID, "ready", "attached", handle));
  await store.write(STOPPED_ID, record(STOPPED_ID, "stopped", "detached", ""));
  const sandboxes = await scratchSandboxManager(t, docker, { network, store, rootDirectory: dir });
  return { sandboxes, store, deleted, stopped, dir };
}

t.test("after a reboot: the sandbox that was ready is stopped and its network released", async (t) => {
  const { sandboxes, store, deleted, stopped, dir } = await setUp(t);
  const report = await recoverSandboxes({ docker: sandboxes["options"].docker, store, sandboxes, rootDirectory: dir, log: createLogger("silent"), rebooted: true });
  t.equal(report.stoppedAfterReboot, 1, "one sandbox stopped; the one stopped before is left alone");
  t.same(
    deleted.map((r) => r.sandboxId),
    [ID],
    "CNI DEL for the sandbox that held an IP",
  );
  // (The CNI layer turns the handle, now a plain file, into an empty CNI_NETNS: test/unit/netns-live.test.ts.)
  t.ok(stopped.includes(ID), "its pause container stopped (a no-op on an exited one)");
  const saved = await store.read(ID);
  t.equal(saved?.phase, "stopped", "checkpointed as stopped");
  t.equal(saved?.network.phase, "detached", "with its network detached: kubelet's Stop does not DEL again");
});

t.test("without a reboot nothing is stopped", async (t) => {
  const { sandboxes, store, deleted, dir } = await setUp(t);
  const report = await recoverSandboxes({ docker: sandboxes["options"].docker, store, sandboxes, rootDirectory: dir, log: createLogger("silent") });
  t.equal(report.stoppedAfterReboot, 0);
  t.same(deleted, [], "no DEL: a restart of cridock leaves running pods as they are");
  t.equal((await store.read(ID))?.phase, "ready");
});

t.test("a corrupt checkpoint is set aside, with the rest recovered", async (t) => {
  const { sandboxes, store, dir } = await setUp(t);
  const torn = "c".repeat(64);
  await writeFile(store.pathOf(torn), '{"version":1,"data":{"id":"ccc');
  const report = await recoverSandboxes({ docker: sandboxes["options"].docker, store, sandboxes, rootDirectory: dir, log: createLogger("silent") });
  t.equal(report.corrupt, 1);
  t.equal(report.loaded, 2, "the two readable ones loaded");
  t.notOk((await store.keys()).includes(torn), "no longer a checkpoint");
  const aside = await readdir(join(store.directory, CORRUPT_DIR));
  t.equal(aside.length, 1, "kept in corrupt/");
  t.match(aside[0], new RegExp(`^${torn}\\.json\\.`), "named after it, with the time");
});
