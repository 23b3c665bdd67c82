/**
 * Container lifecycle against a real dockerd: exit codes and reasons, OOM,
 * the security context as seen from inside the container, bad input, and no
 * leaked containers.
 */
import t from "tap";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, settledLog, startHarness, status, waitExited } from "./harness.ts";

const h = await startHarness();
t.teardown(async () => {
  await h.close();
});
const pod = await runPod(h);

async function runToExit(name: string, command: string[], extra: Record<string, unknown> = {}) {
  const id = await createContainer(h, pod, containerConfig(name, command, extra));
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  const text = await settledLog(s.logPath);
  return { id, s, log: text.split("\n").filter(Boolean).map((l) => l.split(" ").slice(3).join(" ")).join("\n") };
}

t.test("create → start → running → stop → exited → remove", async (t) => {
  const id = await createContainer(h, pod, containerConfig("sleeper", ["sleep", "3600"], { labels: { app: "x" }, annotations: { "k8s/a": "b" } }));
  let s = await status(h, id);
  t.equal(s.state, 0, "CREATED");
  t.same(s.labels, { app: "x" });
  t.same(s.annotations, { "k8s/a": "b" });
  t.match(s.imageRef, /^sha256:[0-9a-f]{64}$/);
  await h.client.call("StartContainer", { containerId: id });
  s = await status(h, id);
  t.equal(s.state, 1, "RUNNING");
  t.ok(s.startedAt > 0n);
  const listed = (await h.client.call("ListContainers", { filter: { id: id.slice(0, 12), labelSelector: { app: "x" } } })).containers;
  t.same(listed.map((c: { id: string }) => c.id), [id], "found by id prefix and label");
  const none = (await h.client.call("ListContainers", { filter: { podSandboxId: pod.podSandboxId, state: { state: 2 } } })).containers;
  t.notOk(none.some((c: { id: string }) => c.id === id), "state filter");
  await h.client.call("StopContainer", { containerId: id, timeout: 0n });
  s = await status(h, id);
  t.equal(s.state, 2, "EXITED right after StopContainer returns");
  // Not pid 1 (the pod shares the pause container's PID namespace), so SIGTERM ends it.
  t.ok([137, 143].includes(s.exitCode), `killed by a signal (${s.exitCode})`);
  await h.client.call("StopContainer", { containerId: id, timeout: 10n });
  await h.client.call("RemoveContainer", { containerId: id });
  await h.client.call("RemoveContainer", { containerId: id });
  await t.rejects(status(h, id), { code: grpcStatus.NOT_FOUND });
});

t.test("exit codes and reasons", async (t) => {
  t.equal((await runToExit("ok", ["true"])).s.reason, "Completed");
  const failed = await runToExit("fail", ["sh", "-c", "exit 3"]);
  t.equal(failed.s.exitCode, 3);
  t.equal(failed.s.reason, "Error");
  const id = await createContainer(h, pod, containerConfig("cannot-run", ["/no/such/binary"]));
  await t.rejects(h.client.call("StartContainer", { containerId: id }));
  const s = await status(h, id);
  t.equal(s.state, 2);
  t.equal(s.reason, "ContainerCannotRun");
  t.match(s.message, /no such file|not found/);
});

t.test("OOM kill under a 15 MiB limit", async (t) => {
  const limit = 15n * 1024n * 1024n;
  const { s } = await runToExit("oom", ["sh", "-c", "dd if=/dev/zero of=/dev/null bs=64M count=1"], {
    linux: { resources: { memoryLimitInBytes: limit, memorySwapLimitInBytes: limit } },
  });
  t.equal(s.reason, "OOMKilled");
  t.equal(s.exitCode, 137);
  t.equal(s.resources.linux.memoryLimitInBytes, limit);
});

t.test("security context, checked from inside", async (t) => {
  const ids = await runToExit("ids", ["sh", "-c", "id -u; id -g; id -G"], {
    linux: { securityContext: { runAsUser: { value: 1001n }, runAsGroup: { value: 1002n }, supplementalGroups: [1234n, 5678n] } },
  });
  t.same(ids.log.split("\n"), ["1001", "1002", "1002 1234 5678"]);
  const name = await runToExit("username", ["id", "-nu"], { linux: { securityContext: { runAsUsername: "nobody" } } });
  t.equal(name.log, "nobody");
  const ro = await runToExit("ro", ["sh", "-c", "touch /x 2>&1; touch /tmp/y 2>&1; echo done"], {
    linux: { securityContext: { readonlyRootfs: true, readonlyPaths: ["/tmp"] } },
  });
  t.match(ro.log, /touch: \/x: Read-only file system/);
  t.match(ro.log, /touch: \/tmp\/y: Read-only file system/);
  const caps = await runToExit("caps", ["sh", "-c", "grep -E 'CapBnd|Seccomp:|NoNewPrivs' /proc/self/status"], {
    linux: { securityContext: { capabilities: { dropCapabilities: ["ALL"] }, noNewPrivs: true } },
  });
  t.match(caps.log, /CapBnd:\s+0000000000000000/);
  t.match(caps.log, /NoNewPrivs:\s+1/);
  t.match(caps.log, /Seccomp:\s+0/, "no profile means unconfined");
  const seccomp = await runToExit("seccomp", ["grep", "Seccomp:", "/proc/self/status"], {
    linux: { securityContext: { seccomp: { profileType: 0 } } },
  });
  t.match(seccomp.log, /Seccomp:\s+2/, "RuntimeDefault filters");
  const masked = await runToExit("masked", ["sh", "-c", "wc -c < /etc/passwd"], {
    linux: { securityContext: { maskedPaths: ["/etc/passwd"] } },
  });
  t.equal(masked.log, "0", "a masked file reads as empty");
  await t.rejects(
    createContainer(h, pod, containerConfig("group-only", ["true"], { linux: { securityContext: { runAsGroup: { value: 5n } } } })),
    { code: grpcStatus.INVALID_ARGUMENT },
  );
});

t.test("bad input is refused and creates nothing", async (t) => {
  const before = (await h.client.call("ListContainers", {})).containers.length;
  const mount = (hostPath: string) => ({ mounts: [{ containerPath: "/data", hostPath }] });
  const cases: [string, Record<string, unknown>, string, number][] = [
    ["traversal", mount("/tmp/../etc"), pod.podSandboxId, grpcStatus.INVALID_ARGUMENT],
    ["relative", mount("tmp/x"), pod.podSandboxId, grpcStatus.INVALID_ARGUMENT],
    ["logescape", { logPath: "../../escape.log" }, pod.podSandboxId, grpcStatus.INVALID_ARGUMENT],
    ["nosandbox", {}, "0123456789ab".repeat(5) + "abcd", grpcStatus.NOT_FOUND],
    ["noimage", { image: { image: "127.0.0.1:5000/cridock-test/absent:0" } }, pod.podSandboxId, grpcStatus.NOT_FOUND],
    ["Bad_Name", {}, pod.podSandboxId, grpcStatus.INVALID_ARGUMENT],
  ];
  for (const [name, extra, sandbox, code] of cases) {
    const err = await createContainer(h, { podSandboxId: sandbox, config: pod.config }, containerConfig(name, ["true"], extra)).catch((e) => e);
    t.equal(err.code, code, `${name}: ${err.details}`);
  }
  t.equal((await h.client.call("ListContainers", {})).containers.length, before, "nothing created");
});

t.test("removing the pod leaves no container behind", async (t) => {
  await removePod(h, pod.podSandboxId);
  t.same(await leakedContainers(h), []);
});
