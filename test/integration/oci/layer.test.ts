/**
 * cridock's OCI runtime layer (src/oci/) with a real dockerd and its runc:
 * a dockerd of the test's own (test/helpers/private-dockerd.ts) with its own
 * daemon.json, so that the node's engines are never reconfigured.
 * - `cridock oci-layer install` merges the runtime into daemon.json and
 *   reloads dockerd with SIGHUP: dockerd keeps its pid (no restart) and lists
 *   the runtime; the real runtime is dockerd's runc, by name.
 * - A container under the layer with no edits runs as under runc; exec,
 *   stop and remove go through it too.
 * - A container with spec edits has them in the spec runc reads: on cgroup
 *   v2 its cgroup holds the unified value from its first instruction; on
 *   cgroup v1, where runc refuses unified settings, its start fails with
 *   runc's refusal, which only an applied edit can cause.
 * - Edits that cannot be applied fail the start, with cridock's reason in
 *   Docker's answer: the container never runs without what was asked.
 * - `cridock oci-layer uninstall` takes the runtime away the same way, and
 *   removes the launcher once no container uses it.
 */
import t from "tap";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { privateDockerd } from "../../helpers/private-dockerd.ts";
import { ociLayerCommand, ociLayerPaths } from "../../helpers/oci-layer-command.ts";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { DockerClient } from "../../../src/docker/client.ts";
import { createLogger } from "../../../src/log.ts";
import { SpecEditsStore } from "../../../src/oci/edits-store.ts";

t.test("the OCI runtime layer on a real dockerd: registered without a restart, a pass-through, its edits in force, fail closed, removed", async (t) => {
  const dockerd = await privateDockerd({ bridge: "cridock-oci0", configFile: true });
  t.teardown(() => dockerd.destroy());
  await dockerd.start();
  const work = mkdtempSync(join(tmpdir(), "cridock-oci-"));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const { launcher, editsDir, rootfsDir } = ociLayerPaths(work);
  const layer = ociLayerCommand(dockerd, work);
  const docker = new DockerClient({ endpoint: dockerd.endpoint, requestTimeoutMs: 120_000, logger: createLogger("error") });
  t.teardown(() => docker.close());
  const pid = readFileSync(dockerd.pidFile, "utf8").trim();

  const installed = layer("install");
  t.equal(installed.status, 0, `install: ${installed.stdout}${installed.stderr}`);
  const info = await docker.info();
  t.equal(info.Runtimes?.cridock?.path, launcher, "dockerd lists the runtime after SIGHUP");
  t.equal(readFileSync(dockerd.pidFile, "utf8").trim(), pid, "the same dockerd: reloaded, not restarted");
  t.same(JSON.parse(readFileSync(dockerd.configFile!, "utf8")), { runtimes: { cridock: { path: launcher } } });
  t.same(JSON.parse(readFileSync(join(work, "oci-layer.json"), "utf8")), { version: 1, launcher, daemonJson: dockerd.configFile, dockerPidFile: dockerd.pidFile, delegate: "runc", editsDir, rootfsDir }, "install recorded what it registered, for the server's re-registration");
  t.match(readFileSync(launcher, "utf8"), "DELEGATE='runc'", "the real runtime is dockerd's runc, by name: found where containerd's shim finds it, at each call");
  const status = layer("status");
  t.equal(status.status, 0);
  t.match(status.stdout, /^ready: runtime "cridock"/);
  t.equal(layer("install").status, 0, "a second install changes nothing");
  t.equal(readFileSync(dockerd.pidFile, "utf8").trim(), pid);

  const pulled = await docker.raw("POST", "/images/create", { query: { fromImage: BUSYBOX_IMAGE.replace(/:[^:/]+$/, ""), tag: "1.36" } });
  for await (const _ of pulled.body) void _;
  t.equal(pulled.statusCode, 200, `pulled ${BUSYBOX_IMAGE}`);
  const create = (name: string, cmd: string[]) =>
    docker.createContainer(name, { Image: BUSYBOX_IMAGE, Cmd: cmd, HostConfig: { Runtime: "cridock", Memory: 64 << 20 } }).then((c) => c.Id);

  t.test("no edits: the container runs, execs and stops as under runc", async (t) => {
    const id = await create("plain", ["sleep", "300"]);
    await docker.startContainer(id);
    t.equal((await docker.inspectContainer(id)).State.Running, true);
    const exec = await docker.execCreate(id, { Cmd: ["sh", "-c", "exit 7"], AttachStdout: true, AttachStderr: true });
    const stream = await docker.execStart(exec.Id, { tty: false });
    for await (const _ of stream) void _;
    t.equal((await docker.execInspect(exec.Id)).ExitCode, 7, "exec's exit code comes back through the layer");
    await docker.stopContainer(id, 1);
    await docker.removeContainer(id, { force: true });
  });

  t.test("edits reach the spec runc reads", async (t) => {
    const id = await create("edited", ["sh", "-c", "cat /sys/fs/cgroup/memory.oom.group 2>/dev/null || echo v1; sleep 300"]);
    const store = new SpecEditsStore(editsDir);
    await store.write(id, { version: 1, unified: { "memory.oom.group": "1" } });
    const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
    const started = await docker.startContainer(id).then(() => undefined, (err: Error) => err);
    if (v2) {
      t.equal(started, undefined, "started");
      const logs = await docker.raw("GET", `/containers/${id}/logs`, { query: { stdout: true } });
      let text = "";
      for await (const chunk of logs.body) text += Buffer.from(chunk as Uint8Array).subarray(8).toString();
      t.equal(text.trim(), "1", "memory.oom.group was 1 at its first instruction");
    } else {
      t.match(started?.message ?? "", /unified|cgroup ?v1|cgroupv2/i, "runc refused the unified edit cgroup v1 cannot carry: the edit was in its spec");
    }
    await store.remove(id);
    await docker.removeContainer(id, { force: true });
  });

  t.test("edits that cannot be applied fail the start, saying why", async (t) => {
    const id = await create("refused", ["sleep", "300"]);
    await new SpecEditsStore(editsDir).write(id, { version: 1 });
    writeFileSync(join(editsDir, `${id}.json`), '{"version":1,"unified":{"cgroup.procs":"1"}}', { mode: 0o600 });
    const err = await docker.startContainer(id).then(() => undefined, (e: Error) => e);
    t.ok(err, "the start failed");
    t.match(err?.message ?? "", /spec edits could not be applied.*cgroup\.procs/, "Docker's answer carries cridock's reason");
    t.not((await docker.inspectContainer(id)).State.Running, true, "not running");
    await docker.removeContainer(id, { force: true });
  });

  // dockerd keeps its old configuration when it refuses a reload, and only
  // its log says so: the command gives up after --reload-timeout, saying
  // that dockerd answered but never showed the change.
  t.test("a reload dockerd refuses fails after --reload-timeout, saying what /info showed", async (t) => {
    writeFileSync(dockerd.configFile!, JSON.stringify({ "no-such-directive": true, runtimes: { cridock: { path: launcher } } }));
    const started = Date.now();
    const refused = layer("uninstall", "--reload-timeout=3");
    t.equal(refused.status, 1, "uninstall failed");
    t.match(refused.stderr, /did not drop the runtime within 3 s of SIGHUP: its \/info still does not show it \(\d+ answers\)/, refused.stderr);
    t.ok(Date.now() - started < 60_000, "it gave up after its timeout");
    t.equal((await docker.info()).Runtimes?.cridock?.path, launcher, "dockerd still has the runtime");
    t.equal(readFileSync(dockerd.pidFile, "utf8").trim(), pid, "the same dockerd");
    writeFileSync(dockerd.configFile!, JSON.stringify({ runtimes: { cridock: { path: launcher } } }));
    t.equal(layer("uninstall", "--reload-timeout=0").status, 2, "a timeout of 0 is refused as a usage error");
  });

  t.test("uninstall: unregistered without a restart, launcher removed once unused", async (t) => {
    const removed = layer("uninstall");
    t.equal(removed.status, 0, `uninstall: ${removed.stdout}${removed.stderr}`);
    t.equal((await docker.info()).Runtimes?.cridock, undefined, "dockerd no longer lists it");
    t.equal(readFileSync(dockerd.pidFile, "utf8").trim(), pid, "the same dockerd");
    t.same(JSON.parse(readFileSync(dockerd.configFile!, "utf8")), { runtimes: {} }, "an empty runtimes stays: without it dockerd's reload keeps the old ones");
    t.notOk(existsSync(launcher), "no container uses the launcher: removed");
    t.notOk(existsSync(join(work, "oci-layer.json")), "install's record is removed: nothing registers it again");
    t.equal(layer("status").status, 1, "status: not ready");
  });
});
