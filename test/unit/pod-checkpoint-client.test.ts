/**
 * scripts/ops/pod-checkpoint.ts, the operator's client of CheckpointPod
 * and RestorePod: its command line, crictl's JSON files as the proto's
 * messages (snake_case names, an env's value as text, label keys kept),
 * and a call over a unix socket answered as JSON.
 */
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CriServer } from "../../src/cri/server.ts";
import { createLogger } from "../../src/log.ts";
import { invoke, parseArguments } from "../../scripts/ops/pod-checkpoint.ts";

t.test("the command line", async (t) => {
  t.match(parseArguments(["checkpoint", "abc", "/root/p.tar", "c1", "c2"]), {
    endpoint: "unix:///var/run/cridock.sock",
    timeoutSeconds: 600,
    method: "CheckpointPod",
    request: { podSandboxId: "abc", outputPath: "/root/p.tar", containerIds: ["c1", "c2"] },
  });
  const files: Record<string, unknown> = {
    "pod.json": { metadata: { name: "web", namespace: "default", uid: "u2", attempt: 1 }, log_directory: "/var/log/pods/w", labels: { "app.kubernetes.io/name_x": "web" } },
    "ctr.json": { metadata: { name: "count" }, envs: [{ key: "A", value: "text" }], log_path: "count.log" },
  };
  const restore = parseArguments(["--endpoint", "unix:///s.sock", "--timeout", "30", "restore", "/root/p.tar", "--config", "pod.json", "--container-config", "ctr.json", "--runtime-handler", "runc"], (p) => files[p]);
  t.match(restore, { endpoint: "unix:///s.sock", timeoutSeconds: 30, method: "RestorePod", request: { checkpointPath: "/root/p.tar", runtimeHandler: "runc" } });
  t.match(restore.request.config, { metadata: { name: "web", uid: "u2", attempt: 1 }, logDirectory: "/var/log/pods/w", labels: { "app.kubernetes.io/name_x": "web" } }, "snake_case fields camelCased, label keys kept");
  const ctr = (restore.request.containerConfigs as Record<string, unknown>[])[0]!;
  t.match(ctr, { metadata: { name: "count" }, logPath: "count.log" });
  t.same((ctr.envs as { value: Buffer }[])[0]!.value, Buffer.from("text"), "an env's value (bytes on the wire) from its text");
  t.throws(() => parseArguments(["restore"]), /usage:/);
  t.throws(() => parseArguments(["--timeout", "0", "checkpoint", "a", "/p"]), /--timeout must be a positive number/);
  t.throws(() => parseArguments(["restore", "/p", "--config", "pod.json"], () => ({ metadata: {}, bogus: 1 })), /PodSandboxConfig has no field bogus/);
});

t.test("a call over a unix socket, answered as JSON", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-podclient-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, "cri.sock");
  const server = new CriServer({
    socketPath,
    logger: createLogger("silent" as never),
    runtimeHandlers: { RestorePod: async () => ({ podSandboxId: "d".repeat(64), restoredContainers: [{ name: "count", containerId: "e".repeat(64) }] }) },
    imageHandlers: {},
  });
  await server.start();
  t.teardown(() => server.stop(1000));
  const answer = await invoke({ endpoint: `unix://${socketPath}`, timeoutSeconds: 10, method: "RestorePod", request: { checkpointPath: "/p.tar" } });
  t.same(answer, { podSandboxId: "d".repeat(64), restoredContainers: [{ name: "count", containerId: "e".repeat(64) }] });
  await t.rejects(invoke({ endpoint: `unix://${socketPath}`, timeoutSeconds: 10, method: "CheckpointPod", request: {} }), { code: 12 }, "UNIMPLEMENTED where the server has no handler");
});
