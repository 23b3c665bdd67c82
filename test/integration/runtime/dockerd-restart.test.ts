// When dockerd goes away and comes back, cridock follows without a restart:
// RuntimeReady false (with a reason) while it is down, true again after.
// Status answers from memory while Docker's event stream vouches for dockerd,
// so the change shows once cridock has seen that stream end (well within 5 s).
import t from "tap";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { privateDockerd } from "../../helpers/private-dockerd.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";

type Condition = { type: string; status: boolean; reason: string; message: string };

t.test("RuntimeReady follows dockerd going away and coming back", async (t) => {
  const dockerd = await privateDockerd();
  t.teardown(() => dockerd.destroy());
  await dockerd.start();
  const cridock = await startCridockProcess({ flags: [`--docker-endpoint=${dockerd.endpoint}`, "--network-plugin=no-op"] });
  t.teardown(() => cridock.stop());
  const runtimeReady = async (): Promise<Condition> => {
    const s = await cridock.client.call("Status", {});
    return s.status.conditions.find((c: Condition) => c.type === "RuntimeReady");
  };

  t.equal((await runtimeReady()).status, true, "ready while dockerd runs");
  t.equal((await cridock.client.call("Version", {})).runtimeName, "docker");

  await dockerd.stop();
  let down = await runtimeReady();
  for (const deadline = Date.now() + 5_000; down.status && Date.now() < deadline; down = await runtimeReady()) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.equal(down.status, false, "not ready while dockerd is down");
  t.equal(down.reason, "DockerDaemonNotReady");
  t.match(down.message, dockerd.socketPath, "the message says where cridock looked");
  await t.rejects(cridock.client.imageCall("ListImages", {}), { code: grpcStatus.UNAVAILABLE }, "calls that need dockerd are UNAVAILABLE");

  await dockerd.start();
  t.equal((await runtimeReady()).status, true, "ready again without restarting cridock");
  t.equal((await cridock.client.call("Version", {})).version, "0.1.0");
  t.ok(cridock.child.exitCode === null, "cridock never exited");
});
