// StopPodSandbox on a pod whose containers still run: CRI asks the runtime to
// forcibly stop every container of the sandbox (kubelet has already stopped
// them gracefully when it mattered), and kubeadm reset gives each call 2 s.
// Containers that ignore SIGTERM (any PID 1 without a handler does) must be
// killed without waiting for Docker's stop timeout.
import t from "tap";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { assertNoLeaks, docker, podConfig, runInPod, runPod, startSandboxEnv } from "./helpers.ts";

const NOTREADY = 1;

t.test("StopPodSandbox kills running containers at once, SIGTERM-ignoring ones too, and well within kubeadm's 2 s", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  const { id } = await runPod(env, podConfig("stop-running"));
  const containers = [
    // PID 1 without a handler: the kernel drops SIGTERM.
    runInPod(id, BUSYBOX_IMAGE, true, "sleep", "3600"),
    // An explicit ignore, in a shell that forks.
    runInPod(id, BUSYBOX_IMAGE, true, "sh", "-c", "trap '' TERM; while :; do sleep 1; done"),
    runInPod(id, BUSYBOX_IMAGE, true, "sh", "-c", "trap '' TERM INT; while :; do sleep 1; done"),
    // One that would exit on SIGTERM, but slowly (a long cleanup).
    runInPod(id, BUSYBOX_IMAGE, true, "sh", "-c", "trap 'sleep 30; exit 0' TERM; while :; do sleep 1; done"),
  ];
  for (const c of containers) t.equal(docker("inspect", "-f", "{{.State.Running}}", c), "true", `${c.slice(0, 12)} runs`);

  const started = performance.now();
  await client.call("StopPodSandbox", { podSandboxId: id });
  const ms = performance.now() - started;
  t.comment(`StopPodSandbox with ${containers.length} running containers took ${ms.toFixed(0)} ms`);
  // Docker's default stop timeout is 10 s: any grace period shows up as far more than this.
  t.ok(ms < 2000, `StopPodSandbox returned in ${ms.toFixed(0)} ms, under kubeadm reset's 2 s deadline`);

  for (const c of containers) {
    const [running, exitCode] = docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", c).split(" ");
    t.equal(running, "false", `${c.slice(0, 12)} is stopped once StopPodSandbox returns`);
    t.equal(exitCode, "137", `${c.slice(0, 12)} was killed (SIGKILL), not asked to stop`);
  }
  t.equal(docker("inspect", "-f", "{{.State.Running}}", id), "false", "the pause container is stopped");
  const { status } = await client.call("PodSandboxStatus", { podSandboxId: id });
  t.equal(status.state, NOTREADY);

  await client.call("RemovePodSandbox", { podSandboxId: id });
  for (const c of containers) t.throws(() => docker("inspect", c), "RemovePodSandbox removed the container");
  await assertNoLeaks(t, env);
});
