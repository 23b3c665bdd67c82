// supplemental_groups_policy Strict on the pause container: Config.User is
// always user:group, so Docker adds nothing from the pause image's
// /etc/group; the group comes from the request, the pause image's USER, or
// the pause image's /etc/passwd.
import t from "tap";
import type { SandboxSpec } from "../../../../src/runtime/sandbox/spec.ts";
import type { ContainerCreateBody } from "../../../../src/docker/types.ts";
import { runningPauseInspect, sandboxSpec, scratchSandboxManager } from "../../../helpers/sandbox-fixtures.ts";

async function pauseUser(t: { teardown(fn: () => unknown): void }, security: Partial<SandboxSpec["security"]>, imageUser: string, passwd: string | undefined) {
  const bodies: ContainerCreateBody[] = [];
  const reads: string[] = [];
  let n = 0;
  const sandboxes = await scratchSandboxManager(
    t,
    {
      createContainer: async (_name: string, body: ContainerCreateBody) => {
        bodies.push(body);
        return { Id: String(++n).repeat(64), Warnings: [] };
      },
      startContainer: async () => undefined,
      inspectContainer: async (id: string) => runningPauseInspect(id, "2026-01-02T03:04:05Z"),
      inspectContainerCached: async (id: string) => runningPauseInspect(id, "2026-01-02T03:04:05Z"),
      listContainers: async () => [],
    },
    {
      pauseImage: "pause:1",
      ensureImage: async () => ({ id: "sha256:pause", inspect: { Config: { User: imageUser } } }),
      files: {
        readText: async (id, path) => {
          reads.push(`${id} ${path}`);
          return passwd;
        },
        exists: async () => false,
      },
    },
  );
  const base = sandboxSpec().security;
  await sandboxes.run(
    sandboxSpec({
      metadata: { name: "web", namespace: "default", uid: `u${Math.random()}`, attempt: 0 },
      security: { ...base, supplementalGroups: ["1234"], ...security },
    }),
  );
  return { user: bodies[0]!.User, groupAdd: bodies[0]!.HostConfig?.GroupAdd, reads };
}

const PASSWD = "root:x:0:0::/root:/bin/sh\napp:x:1000:1500::/:/bin/sh\n";

t.test("Strict: the pause container's user always names a group", async (t) => {
  const fromPasswd = await pauseUser(t, { supplementalGroupsStrict: true, runAsUser: "1000" }, "", PASSWD);
  t.same(fromPasswd, { user: "1000:1500", groupAdd: ["1234"], reads: ["sha256:pause /etc/passwd"] }, "run_as_user only: the gid from the pause image's /etc/passwd");
  const both = await pauseUser(t, { supplementalGroupsStrict: true, runAsUser: "1000", runAsGroup: "7" }, "", PASSWD);
  t.same(both, { user: "1000:7", groupAdd: ["1234"], reads: [] }, "run_as_user and run_as_group: no image read");
  const imageUser = await pauseUser(t, { supplementalGroupsStrict: true }, "65535:65535", undefined);
  t.same(imageUser.user, "65535:65535", "the pause image's USER with its group");
  const root = await pauseUser(t, { supplementalGroupsStrict: true }, "", PASSWD);
  t.same(root.user, "0:0", "root, with root's group");
  const merge = await pauseUser(t, { runAsUser: "1000" }, "", PASSWD);
  t.same(merge, { user: "1000", groupAdd: ["1234"], reads: [] }, "Merge: as before");
});
