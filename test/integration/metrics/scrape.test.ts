/**
 * The /metrics endpoint during a real pod lifecycle (dockerd, CNI bridge,
 * busybox container that logs): every family docs/operating.md lists moves the way
 * the calls made it move, and the pod leaves nothing behind.
 */
import t from "tap";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { freePort, scrape, sum, value } from "../../helpers/metrics-scrape.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, startHarness, status, waitExited, waitLog } from "../containers/harness.ts";
import { join } from "node:path";

const port = await freePort();
const h = await startHarness([`--metrics-bind-addr=127.0.0.1:${port}`]);
t.teardown(() => h.close());

const RPC = (method: string, code = "OK") => `cridock_cri_requests_total{service="RuntimeService",method="${method}",code="${code}"}`;

t.test("a pod lifecycle moves the counters", async (t) => {
  const before = await scrape(port);
  t.ok(value(before, "cridock_process_resident_memory_bytes") > 0, "process metrics are there");
  t.ok(value(before, "cridock_process_cpu_seconds_total") > 0);
  t.equal(sum(before, "cridock_image_pulls_total", 'result="success"'), 1, "the harness's pull was counted");

  await h.client.imageCall("PullImage", { image: { image: BUSYBOX_IMAGE } });
  await t.rejects(h.client.call("PodSandboxStatus", { podSandboxId: "f".repeat(64) }));
  const pod = await runPod(h);
  const lines = 200;
  const id = await createContainer(h, pod, containerConfig("talker", ["sh", "-c", `for i in $(seq ${lines}); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done; sleep 3600`]));
  await h.client.call("StartContainer", { containerId: id });
  const logPath = join((pod.config as { logDirectory: string }).logDirectory, "talker.log");
  const logText = await waitLog(logPath, (text) => text.includes(`line-${lines}-`));

  const during = await scrape(port);
  t.equal(value(during, RPC("RunPodSandbox")) - value(before, RPC("RunPodSandbox")), 1, "RunPodSandbox OK +1");
  t.equal(value(during, RPC("PodSandboxStatus", "NOT_FOUND")) - value(before, RPC("PodSandboxStatus", "NOT_FOUND")), 1, "errors are counted by code");
  t.ok(
    value(during, 'cridock_cri_request_duration_seconds_count{service="RuntimeService",method="StartContainer"}') >= 1,
    "latency histogram of StartContainer",
  );
  t.equal(sum(during, "cridock_image_pulls_total", 'result="success"') - sum(before, "cridock_image_pulls_total", 'result="success"'), 1, "pull +1");
  t.ok(value(during, 'cridock_image_pull_duration_seconds_count{result="success"}') >= 2, "pull time observed");
  t.equal(
    value(during, 'cridock_cni_operation_duration_seconds_count{operation="ADD"}') - value(before, 'cridock_cni_operation_duration_seconds_count{operation="ADD"}'),
    1,
    "one CNI ADD",
  );
  const creates = (s: Map<string, number>) => value(s, 'cridock_docker_request_duration_seconds_count{method="POST",endpoint="/containers/create"}');
  t.equal(creates(during) - creates(before), 2, "two Docker creates (pause and container), under one endpoint template");
  t.notOk([...during.keys()].some((k) => k.includes(id.slice(0, 12))), "no series is labelled with a container id");
  const step = (s: Map<string, number>, operation: string, name: string) =>
    value(s, `cridock_operation_step_duration_seconds_count{operation="${operation}",step="${name}"}`);
  t.equal(step(during, "RunPodSandbox", "total") - step(before, "RunPodSandbox", "total"), 1, "the step timer's total of RunPodSandbox");
  t.equal(step(during, "RunPodSandbox", "docker.create") - step(before, "RunPodSandbox", "docker.create"), 1, "its Docker create step");
  t.equal(step(during, "RunPodSandbox", "cni.add.bridge") - step(before, "RunPodSandbox", "cni.add.bridge"), 1, "its CNI bridge plugin exec");
  t.ok(step(during, "StartContainer", "docker.start") >= 1, "StartContainer's steps");
  const logBytes = value(during, "cridock_container_log_bytes_total") - value(before, "cridock_container_log_bytes_total");
  t.ok(logBytes >= Buffer.byteLength(logText), `log bytes moved by the file's size (${logBytes} ≥ ${Buffer.byteLength(logText)})`);
  t.equal(value(during, "cridock_container_log_lost_total"), 0, "nothing lost to rotation");
  // Deltas: cridock lists every pod on the (shared) dockerd, as kubelet would see them.
  const gauge = (s: Map<string, number>, name: string) => value(s, name) - value(before, name);
  t.equal(gauge(during, 'cridock_pod_sandboxes{state="SANDBOX_READY"}'), 1, "one more ready sandbox");
  t.equal(gauge(during, 'cridock_containers{state="CONTAINER_RUNNING"}'), 1, "one more running container");
  t.equal(gauge(during, 'cridock_log_followers{state="copying"}'), 1, "one more log follower copying");
  t.ok(value(during, 'cridock_docker_connections{pool="quick"}') >= 1, "a quick connection to dockerd is open");
  t.ok(value(during, 'cridock_docker_connections{pool="long"}') >= 1, "a long-held one too (the event stream at least)");

  await h.client.call("StopContainer", { containerId: id, timeout: 0n });
  await waitExited(h, id);
  t.equal((await status(h, id)).state, 2);
  const exited = await scrape(port);
  t.equal(gauge(exited, 'cridock_containers{state="CONTAINER_EXITED"}'), 1, "the gauge follows the state");
  t.equal(gauge(exited, 'cridock_containers{state="CONTAINER_RUNNING"}'), 0);

  await removePod(h, pod.podSandboxId);
  const after = await scrape(port);
  t.equal(
    value(after, 'cridock_cni_operation_duration_seconds_count{operation="DEL"}') - value(before, 'cridock_cni_operation_duration_seconds_count{operation="DEL"}'),
    1,
    "one CNI DEL",
  );
  t.equal(value(after, 'cridock_cni_operation_errors_total{operation="DEL"}'), 0);
  t.equal(gauge(after, 'cridock_pod_sandboxes{state="SANDBOX_READY"}'), 0, "back to where it was");
  t.equal(gauge(after, 'cridock_log_followers{state="copying"}') + gauge(after, 'cridock_log_followers{state="done"}'), 0, "the follower is let go with its container");
  t.same(await leakedContainers(h), [], "no container left");
});

t.test("only /metrics is served", async (t) => {
  t.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 404);
  t.equal((await fetch(`http://127.0.0.1:${port}/metrics`, { method: "POST" })).status, 405);
});
