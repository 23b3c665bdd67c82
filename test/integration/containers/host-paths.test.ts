/**
 * A hostPath volume whose host path does not exist: kubelet checks nothing
 * for type "" (kube-proxy's /lib/modules, on a host without it) and leaves
 * the path to the runtime. Like containerd's CRI plugin (and Docker's Binds
 * before the Mount API), cridock creates it as a directory and the
 * container starts with it mounted. And a host path that holds Docker's data
 * root ("/") or lies inside it mounts as privately as Docker allows there.
 */
import t from "tap";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DockerClient } from "../../../src/docker/client.ts";
import { silentLogger } from "../../../src/log.ts";
import { TEST_DOCKER_ENDPOINT } from "../../helpers/env.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, waitExited } from "./harness.ts";

const h = await startHarness();
t.teardown(() => h.close());
const scratch = await mkdtemp(join(tmpdir(), "cridock-hostpath-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

t.test("a missing host path is created as a directory and mounted", async (t) => {
  const pod = await runPod(h);
  const hostPath = join(scratch, "lib/modules");
  const id = await createContainer(
    h,
    pod,
    containerConfig("kube-proxy-like", ["sh", "-c", "test -d /lib/modules && echo seen > /lib/modules/marker"], {
      mounts: [{ containerPath: "/lib/modules", hostPath, readonly: false }],
    }),
  );
  t.ok((await stat(hostPath)).isDirectory(), "created (with its parent) at CreateContainer");
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  t.equal(s.exitCode, 0, `the container saw a directory there (${s.reason} ${s.message})`);
  t.equal(await readFile(join(hostPath, "marker"), "utf8"), "seen\n", "and it is the host's directory");
  t.equal(s.mounts[0]?.hostPath, hostPath, "ContainerStatus reports the path as asked");
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
});

t.test("a read-only mount of a missing host path starts too", async (t) => {
  const pod = await runPod(h);
  const hostPath = join(scratch, "ro-missing");
  const id = await createContainer(h, pod, containerConfig("ro", ["test", "-d", "/ro"], { mounts: [{ containerPath: "/ro", hostPath, readonly: true }] }));
  await h.client.call("StartContainer", { containerId: id });
  t.equal((await waitExited(h, id)).exitCode, 0);
  await removePod(h, pod.podSandboxId);
});

t.test("host paths that hold Docker's data root or lie in it mount with private propagation (hostPath / as cAdvisor and node agents ask)", async (t) => {
  // dockerd refuses an explicit rprivate there ("must use either propagation
  // mode rslave or rshared when mount source is within the daemon root") and
  // picks rslave itself when none is named; a private CRI mount names none.
  const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  const { DockerRootDir: dataRoot } = await docker.info();
  t.match(dataRoot, /^\//, "the engine reports its data root");
  const marker = join(scratch, "rootfs-marker");
  await writeFile(marker, "host\n");
  const pod = await runPod(h);
  const id = await createContainer(
    h,
    pod,
    containerConfig("rootfs-reader", ["sh", "-c", `cat /rootfs${marker} && test -d /data-root`], {
      mounts: [
        { containerPath: "/rootfs", hostPath: "/", readonly: true },
        { containerPath: "/data-root", hostPath: dataRoot, readonly: true },
      ],
    }),
  );
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  t.equal(s.exitCode, 0, `the container read the host's files through /rootfs (${s.reason} ${s.message})`);
  t.same(
    s.mounts.map((m: { hostPath: string; propagation?: number }) => [m.hostPath, m.propagation ?? 0]),
    [["/", 0], [dataRoot, 0]],
    "ContainerStatus reports them as asked: private",
  );
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
});
