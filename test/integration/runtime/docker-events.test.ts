// The container event stream cridock follows carries the events its
// subscribers use (start, die, destroy …) and not the three exec events each
// ExecSync or exec probe makes, which only cost CPU and dropped the list cache.
import t from "tap";
import { execFileSync } from "node:child_process";
import { DockerClient } from "../../../src/docker/client.ts";
import { silentLogger } from "../../../src/log.ts";
import { BUSYBOX_IMAGE, TEST_DOCKER_ENDPOINT, TEST_DOCKER_SOCKET } from "../../helpers/env.ts";

function docker(...args: string[]): string {
  return execFileSync("docker", ["-H", `unix://${TEST_DOCKER_SOCKET}`, ...args], { encoding: "utf8" }).trim();
}

t.test("exec events are not followed; the container's start, death and removal are", async (t) => {
  const client = new DockerClient({ endpoint: TEST_DOCKER_ENDPOINT, requestTimeoutMs: 60_000, logger: silentLogger });
  t.teardown(() => client.close());
  const id = docker("create", "--network", "none", "--label", "suite=docker-events", BUSYBOX_IMAGE, "sleep", "300");
  t.teardown(() => {
    execFileSync("docker", ["-H", `unix://${TEST_DOCKER_SOCKET}`, "rm", "-f", id], { stdio: "ignore" });
  });
  const seen: string[] = [];
  client.events.subscribe((e) => {
    if (e.id === id) seen.push(e.action);
  });
  const connected = new Promise<void>((resolve) => client.events.onConnection((up) => up && resolve()));
  client.events.start();
  await connected;
  docker("start", id);
  for (let i = 0; i < 3; i++) docker("exec", id, "true");
  docker("kill", id);
  docker("rm", id);
  const deadline = Date.now() + 10_000;
  while (!seen.includes("destroy") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.ok(seen.includes("start") && seen.includes("die") && seen.includes("destroy"), `start, die and destroy arrive: ${seen.join(", ")}`);
  t.same(seen.filter((a) => a.startsWith("exec_")), [], "no exec event arrives");
});
