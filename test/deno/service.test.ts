/**
 * The operator-facing parts under Deno: socket activation with readiness
 * (fd://, NOTIFY_SOCKET), the /metrics endpoint, and `cridock check`.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT, startCridockProcess } from "../helpers/cridock-process.ts";
import { cridockTestFlags, makeCniConfDir } from "../helpers/env.ts";
import { freePort, scrape, value } from "../helpers/metrics-scrape.ts";
import { activationScenario } from "../helpers/systemd-fakes.ts";

const DENO = join(REPO_ROOT, "node_modules/.bin/deno");

t.test("socket activation and readiness under Deno", (t) => activationScenario(t, "deno"));

t.test("metrics under Deno", async (t) => {
  const cni = await makeCniConfDir();
  t.teardown(() => cni.cleanup());
  const port = await freePort();
  const cridock = await startCridockProcess({ runtime: "deno", flags: [...cridockTestFlags(cni), `--metrics-bind-addr=${port}`], startTimeoutMs: 120_000 });
  t.teardown(() => cridock.stop());
  const before = await scrape(port);
  await cridock.client.call("Version", { version: "v1" });
  await cridock.client.call("ListPodSandbox", {});
  const after = await scrape(port);
  const calls = (s: Map<string, number>) => value(s, 'cridock_cri_requests_total{service="RuntimeService",method="Version",code="OK"}');
  t.equal(calls(after) - calls(before), 1, "the Version call was counted");
  t.ok(value(after, "cridock_process_resident_memory_bytes") > 0, "process metrics work under Deno");
  t.ok(after.has('cridock_pod_sandboxes{state="SANDBOX_READY"}'), "the state gauges are computed under Deno");
  t.ok(value(after, 'cridock_docker_request_duration_seconds_count{method="GET",endpoint="/containers/json"}') >= 1, "Docker requests are timed by endpoint");
});

t.test("cridock check under Deno", async (t) => {
  const cni = await makeCniConfDir();
  t.teardown(() => cni.cleanup());
  const result = spawnSync(DENO, ["run", "-A", join(REPO_ROOT, "src/main.ts"), "check", ...cridockTestFlags(cni), "--root-directory=/tmp/cridock-deno-check", "--container-runtime-endpoint=unix:///tmp/cridock-deno-check.sock"], {
    encoding: "utf8",
    timeout: 120_000,
  });
  t.equal(result.status, 0, result.stdout + result.stderr);
  t.match(result.stdout, /^OK +docker /m);
  t.match(result.stdout, /^OK +cni /m);
  t.match(result.stdout, /cridock can serve pods on this node/);
});
