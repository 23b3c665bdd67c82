// A pod's host ids are its own: RunPodSandbox refuses mappings that overlap
// those of another pod's live sandbox, recorded or still being created,
// naming that pod; the attempts of one pod share theirs, and a stopped
// sandbox holds none.
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { UsernsMappings } from "../../../../src/oci/id-mappings.ts";
import { CridockError } from "../../../../src/errors.ts";
import { runningPauseInspect, sandboxSpec, scratchSandboxManager } from "../../../helpers/sandbox-fixtures.ts";

const range = (hostId: number): UsernsMappings => ({ uids: [{ containerId: 0, hostId, length: 65536 }], gids: [{ containerId: 0, hostId, length: 65536 }] });
const pod = (name: string, uid: string, hostId: number, attempt = 0) =>
  sandboxSpec({ metadata: { name, namespace: "default", uid, attempt }, hostname: name, userns: range(hostId) });

t.test("overlapping host ids of another live pod are INVALID_ARGUMENT naming it", async (t) => {
  const edits = await mkdtemp(join(tmpdir(), "cridock-claims-"));
  t.teardown(() => rm(edits, { recursive: true, force: true }));
  let n = 0;
  let gate: Promise<void> = Promise.resolve();
  const sandboxes = await scratchSandboxManager(
    t,
    {
      createContainer: async () => {
        await gate;
        return { Id: String(++n).repeat(64), Warnings: [] };
      },
      startContainer: async () => undefined,
      inspectContainer: async (id: string) => runningPauseInspect(id, "2026-01-02T03:04:05Z"),
      inspectContainerCached: async (id: string) => runningPauseInspect(id, "2026-01-02T03:04:05Z"),
      listContainers: async () => [],
    },
    { userns: async () => ({ ok: true, layer: { runtime: "cridock", launcher: "/l", delegate: "runc", editsDir: edits, rootfsDir: "/run/cridock-rootfs" } }) },
  );
  const refusal = (p: Promise<unknown>) => p.then(() => "none", (err: unknown) => (err instanceof CridockError ? `${err.code} ${err.message}` : String(err)));

  const web = await sandboxes.run(pod("web", "uid-web", 65536 * 7));
  t.ok(web, "the first pod runs");
  t.match(await refusal(sandboxes.run(pod("db", "uid-db", 65536 * 7 + 4096))), /^INVALID_ARGUMENT .*overlap host uids 458752-524287 of pod default\/web \(sandbox 111111111111\)/);
  t.ok(await sandboxes.run(pod("web", "uid-web", 65536 * 7, 1)), "another attempt of the same pod shares its ids");
  t.ok(await sandboxes.run(pod("db", "uid-db", 65536 * 8)), "the next range is free");

  // Two creates at once: the second sees the first's claim before either is recorded.
  let open!: () => void;
  gate = new Promise((resolve) => (open = resolve));
  const first = sandboxes.run(pod("a", "uid-a", 65536 * 20));
  const second = refusal(sandboxes.run(pod("b", "uid-b", 65536 * 20)));
  open();
  t.ok(await first);
  t.match(await second, /^INVALID_ARGUMENT .*of pod default\/a \(being created\)/);
  t.ok(await sandboxes.run(pod("c", "uid-c", 65536 * 21)), "a failed or finished claim is let go: nothing else is held");
  t.match(await refusal(sandboxes.run(pod("d", "uid-d", 1000))), /^INVALID_ARGUMENT .*host's own uids \(0-65535\)/, "the host's own ids, whatever other pods hold");
});
