/**
 * Where the layer is (src/oci/), a container's unified keys without a Docker
 * field go into its OCI spec: it is created with the layer's runtime, and
 * its spec edits exist exactly while Docker starts it. Without the layer,
 * or for a RuntimeClass's runtime, the keys are written after the start.
 */
import t, { type Test } from "tap";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UnifiedSettings } from "../../../../src/runtime/container/unified-settings.ts";
import type { UnifiedCgroups } from "../../../../src/runtime/container/unified-cgroup.ts";
import type { DockerClient } from "../../../../src/docker/client.ts";
import type { ContainerInspect } from "../../../../src/docker/types.ts";
import type { OciLayer } from "../../../../src/oci/layer.ts";
import { UNIFIED_LABEL } from "../../../../src/runtime/container/convert.ts";
import { createLogger } from "../../../../src/log.ts";
import { CridockError } from "../../../../src/errors.ts";

const ID = "f".repeat(64);
const KUBELET_V2 = { "memory.oom.group": "1", "memory.swap.max": "0" };

function settings(t: Test, layer: boolean, version: 1 | 2 = 2) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-unified-start-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const oci: OciLayer = { runtime: "cridock", launcher: "/l", delegate: "/usr/sbin/runc", editsDir: join(dir, "edits") };
  const cgroups = { version: async () => version } as unknown as UnifiedCgroups;
  const unified = new UnifiedSettings({} as DockerClient, cgroups, createLogger("silent" as never), undefined, async () => (layer ? oci : undefined));
  return { unified, oci };
}

const container = (runtime?: string, unified: Record<string, string> = KUBELET_V2) =>
  ({ Id: ID, Config: { Labels: { [UNIFIED_LABEL]: JSON.stringify(unified) } }, HostConfig: { Memory: 64 << 20, Runtime: runtime } }) as unknown as ContainerInspect;

t.test("create: the layer's runtime when some key has no Docker field, on cgroup v2 only", async (t) => {
  const { unified } = settings(t, true);
  t.equal(await unified.runtimeForCreate(KUBELET_V2, { Memory: 64 << 20 }, 2), "cridock");
  t.equal(await unified.runtimeForCreate({ "pids.max": "10" }, {}, 2), undefined, "every key has a Docker field");
  t.equal(await unified.runtimeForCreate({}, {}, 2), undefined);
  t.equal(await unified.runtimeForCreate(KUBELET_V2, { Runtime: "kata" }, 2), undefined, "a RuntimeClass's runtime is kept");
  t.equal(await unified.runtimeForCreate(KUBELET_V2, {}, undefined), undefined);
  const without = settings(t, false).unified;
  t.equal(await without.runtimeForCreate(KUBELET_V2, {}, 2), undefined, "no layer: Docker's default");
});

t.test("start: the edits exist while Docker starts the container, and are gone after", async (t) => {
  const { unified, oci } = settings(t, true);
  const plan = await unified.planStart(container("cridock"));
  t.equal(plan?.via, "spec");
  if (plan?.via !== "spec") return;
  const path = join(oci.editsDir, `${ID}.json`);
  t.same(plan.files, { "memory.oom.group": "1" }, "memory.swap.max went to Docker's MemorySwap");
  const edits = { version: 1 as const, unified: plan.files };
  const seen = await plan.store.around(ID, edits, async () => JSON.parse(readFileSync(path, "utf8")), t.error);
  t.same(seen, edits);
  t.notOk(existsSync(path));
  await t.rejects(plan.store.around(ID, edits, async () => { throw new Error("start failed"); }, t.error), /start failed/);
  t.notOk(existsSync(path), "removed after a failed start too");
});

t.test("start: without the layer, or under another runtime, the keys are written after the start", async (t) => {
  const { unified } = settings(t, true);
  t.same(await unified.planStart(container()), { via: "cgroup", files: { "memory.oom.group": "1" } });
  t.same(await unified.planStart(container("kata")), { via: "cgroup", files: { "memory.oom.group": "1" } });
  t.equal(await unified.planStart(container(undefined, {})), undefined);
  const without = settings(t, false).unified;
  t.same(await without.planStart(container()), { via: "cgroup", files: { "memory.oom.group": "1" } });
});

t.test("start: a container created for a layer dockerd no longer has is refused, not run without its keys", async (t) => {
  const { unified } = settings(t, false);
  const err = await unified.planStart(container("cridock")).catch((e: unknown) => e);
  t.type(err, CridockError);
  t.match(err, { code: "FAILED_PRECONDITION", message: /created for cridock's OCI runtime layer, which dockerd no longer has/ });
});

t.test("start on cgroup v1: keys without a Docker field start nothing", async (t) => {
  const { unified } = settings(t, true, 1);
  await t.rejects(unified.planStart(container("cridock")), /need cgroup v2/);
});
