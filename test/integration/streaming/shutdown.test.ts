/**
 * Stopping cridock (SIGTERM) while streams are live ends them and kills their
 * commands: nothing outlives the server.
 */
import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { TEST_DOCKER_ENDPOINT, cridockTestFlags } from "../../helpers/env.ts";
import { DockerClient } from "../../../src/docker/client.ts";
import { silentLogger } from "../../../src/log.ts";
import { crictlSpawn, eventually, runPod, startContainer, startHarness } from "./harness.ts";

// A root directory of our own: cridock is stopped with its pod still up, and a second
// cridock on the same root then removes the pod (and unmounts its netns handle).
const scratch = await mkdtemp(join(tmpdir(), "cridock-shutdown-"));
const socketPath = join(scratch, "cri.sock");
const rootDirectory = join(scratch, "root");
const h = await startHarness([], { socketPath, rootDirectory });
const docker = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 30_000, logger: silentLogger });
t.teardown(async () => {
  await h.close();
  await docker.close();
});

/** `ps` in the container straight through Docker (cridock is gone by then). */
async function psArgs(containerId: string): Promise<string> {
  const { Id } = await docker.execCreate(containerId, { AttachStdout: true, AttachStderr: true, Cmd: ["ps", "-o", "args"] });
  const socket = await docker.execStart(Id, { tty: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve) => {
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.once("close", resolve);
    socket.once("end", resolve);
  });
  socket.destroy();
  return Buffer.concat(chunks).toString("latin1");
}

t.test("SIGTERM with live SPDY and WebSocket execs kills their commands", async (t) => {
  const pod = await runPod(h);
  const ctr = await startContainer(h, pod, "victim", ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]);
  const clients = [crictlSpawn(h, ["exec", ctr, "sleep", "981"]), crictlSpawn(h, ["exec", "--transport", "websocket", ctr, "sleep", "982"])];
  t.ok(await eventually(async () => /sleep 981[\s\S]*sleep 982|sleep 982[\s\S]*sleep 981/.test(await psArgs(ctr))), "both commands run");
  const code = await h.cridock.stop();
  t.equal(code, 0, "cridock exits cleanly");
  t.notMatch(await psArgs(ctr), /sleep 98[12]/, "no command outlives cridock");
  for (const c of clients) if (c.exitCode === null) c.kill("SIGKILL");
  const again = await startCridockProcess({ flags: cridockTestFlags(h.cni), socketPath, rootDirectory });
  await again.client.call("StopPodSandbox", { podSandboxId: pod });
  await again.client.call("RemovePodSandbox", { podSandboxId: pod });
  h.pods.length = 0;
  await again.stop();
});
t.teardown(() => rm(scratch, { recursive: true, force: true }));
