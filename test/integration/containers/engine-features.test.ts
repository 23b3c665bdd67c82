/**
 * What depends on the engine, decided from what the engine reports:
 * read-only mounts (non-recursive unless recursive_read_only asks, and
 * recursive read-only exactly where Status advertises it) and privileged
 * containers (run wherever the engine itself can run one, refused with
 * FAILED_PRECONDITION where it cannot). Runs against
 * CRIDOCK_TEST_DOCKER_ENDPOINT, like every integration test.
 */
import t from "tap";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, settledLog, startHarness, waitExited } from "./harness.ts";

const h = await startHarness();
t.teardown(async () => {
  await h.close();
});

async function runToExit(pod: { podSandboxId: string; config: object }, name: string, command: string[], extra: Record<string, unknown> = {}) {
  const id = await createContainer(h, pod, containerConfig(name, command, extra));
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  const text = await settledLog(s.logPath);
  return text.split("\n").filter(Boolean).map((l) => l.split(" ").slice(3).join(" ")).join("\n");
}

t.test("readonly mounts: non-recursive by default, recursive only when asked and advertised", async (t) => {
  // A host directory with a tmpfs mounted below it: the submount is what recursion is about.
  const dir = await mkdtemp(join(tmpdir(), "cridock-ro-"));
  execFileSync("mkdir", ["-p", join(dir, "sub")]);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "cridock-ro-test", join(dir, "sub")]);
  t.teardown(async () => {
    spawnSync("umount", ["-l", join(dir, "sub")]);
    await rm(dir, { recursive: true, force: true });
  });
  const pod = await runPod(h);
  t.teardown(() => removePod(h, pod.podSandboxId));
  const probe = ["sh", "-c", "touch /mnt/top 2>/dev/null && echo top=rw || echo top=ro; touch /mnt/sub/below 2>/dev/null && echo sub=rw || echo sub=ro"];
  const mount = (over: object) => ({ mounts: [{ containerPath: "/mnt", hostPath: dir, readonly: true, ...over }] });

  const plain = await runToExit(pod, "ro-plain", probe, mount({}));
  t.equal(plain, "top=ro\nsub=rw", "readonly is the mount itself only: the tmpfs below stays writable");
  const relabel = await runToExit(pod, "ro-relabel", probe, mount({ selinuxRelabel: true }));
  t.equal(relabel, "top=ro\nsub=rw", "the same with selinux_relabel (as critest asks) on an engine without SELinux");

  const status = await h.client.call("Status", { verbose: false });
  const handler = (status.runtimeHandlers as { name: string; features?: { recursiveReadOnlyMounts?: boolean } }[]).find((r) => r.name === "");
  const rroAdvertised = handler?.features?.recursiveReadOnlyMounts === true;
  t.comment(`the engine ${rroAdvertised ? "advertises" : "does not advertise"} recursive read-only mounts`);
  if (rroAdvertised) {
    const rro = await runToExit(pod, "ro-recursive", probe, mount({ recursiveReadOnly: true }));
    t.equal(rro, "top=ro\nsub=ro", "recursive_read_only makes the tmpfs below read-only too");
  } else {
    await t.rejects(createContainer(h, pod, containerConfig("ro-recursive", probe, mount({ recursiveReadOnly: true }))), {
      code: grpcStatus.UNIMPLEMENTED,
      message: /recursive read-only mounts need Docker Engine API 1\.44/,
    });
  }
  await t.rejects(createContainer(h, pod, containerConfig("ro-recursive-rw", probe, mount({ readonly: false, recursiveReadOnly: true }))), {
    code: grpcStatus.INVALID_ARGUMENT,
  });
});

t.test("privileged: runs wherever the engine itself can run a privileged container", async (t) => {
  // The oracle: the engine, asked directly.
  const direct = spawnSync("docker", ["run", "--rm", "--privileged", "--network=none", "--entrypoint=true", BUSYBOX_IMAGE], {
    encoding: "utf8",
    timeout: 120_000,
  });
  const engineCan = direct.status === 0;
  t.comment(`the engine ${engineCan ? "runs" : "cannot run"} privileged containers here${engineCan ? "" : `: ${direct.stderr.trim()}`}`);
  const privileged = { linux: { securityContext: { privileged: true } } };
  if (engineCan) {
    const pod = await runPod(h, privileged);
    t.teardown(() => removePod(h, pod.podSandboxId));
    const out = await runToExit(pod, "priv", ["sh", "-c", "grep CapEff /proc/self/status; mkdir -p /m && mount -t tmpfs none /m && echo mounted"], {
      linux: { securityContext: { privileged: true } },
    });
    t.match(out, /mounted/, "a privileged container can mount");
    t.match(out, /CapEff:\s+0*[1-9a-f][0-9a-f]{8,}/, "with a full set of the host's capabilities");
  } else {
    await t.rejects(runPod(h, privileged), { code: grpcStatus.FAILED_PRECONDITION, message: /privileged/ });
    const pod = await runPod(h);
    t.teardown(() => removePod(h, pod.podSandboxId));
    const id = await createContainer(h, pod, containerConfig("priv", ["true"], privileged));
    await t.rejects(h.client.call("StartContainer", { containerId: id }), { code: grpcStatus.FAILED_PRECONDITION, message: /privileged/ });
  }
});

t.test("nothing leaked", async (t) => {
  t.same(await leakedContainers(h), [], "no container of this run is left (the pods above were removed at the end of their tests)");
});
