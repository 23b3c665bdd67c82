import t from "tap";
import { dockerEndpointTemplate } from "../../../src/metrics/docker-endpoint.ts";
import { CridockMetrics } from "../../../src/metrics/registry.ts";
import { instrumentHandlers } from "../../../src/metrics/rpc.ts";
import { countObjects } from "../../../src/metrics/setup.ts";
import { CridockError } from "../../../src/errors.ts";
import type { CallContext } from "../../../src/cri/handlers.ts";

/** The value of one sample line `name{labels} value` in exposition text, or undefined. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

t.test("Docker paths become bounded endpoint templates", async (t) => {
  const cases: [string, string][] = [
    ["/_ping", "/_ping"],
    ["/v1.41/version", "/version"],
    ["/containers/json", "/containers/json"],
    ["/containers/create", "/containers/create"],
    ["/containers/3f2a9c0d1e/start", "/containers/{id}/start"],
    ["/containers/k8s_POD_x_y_z_0", "/containers/{id}"],
    ["/containers/abc/logs?follow=1", "/containers/{id}/logs"],
    ["/exec/0123abcd/start", "/exec/{id}/start"],
    ["/exec/0123abcd/json", "/exec/{id}/json"],
    ["/images/create", "/images/create"],
    ["/images/json", "/images/json"],
    ["/images/127.0.0.1:5000/cridock-test/busybox:1.36/json", "/images/{name}/json"],
    ["/images/sha256:0123", "/images/{name}"],
    ["/images/busybox/tag", "/images/{name}/tag"],
    ["/distribution/registry.k8s.io/pause:3.10/json", "/distribution/{other}"],
    ["/system/df", "/system/df"],
    ["/events", "/events"],
    ["/containers/abc/Weird-Thing", "/containers/{id}/{other}"],
  ];
  for (const [path, want] of cases) t.equal(dockerEndpointTemplate(path), want, path);
});

t.test("CRI handlers are counted by method and code, unimplemented ones too", async (t) => {
  const metrics = new CridockMetrics({ processMetrics: false });
  const table = instrumentHandlers(
    "RuntimeService",
    {
      Version: async () => ({ version: "0.1.0" }),
      PodSandboxStatus: async () => {
        throw new CridockError("NOT_FOUND", "no such sandbox");
      },
      ListContainerStats: async () => {
        throw new TypeError("a bug");
      },
    },
    metrics,
  );
  const ctx = { method: "x", signal: new AbortController().signal } as CallContext;
  const call = (name: string) => (table[name] as (r: unknown, c: CallContext) => Promise<unknown>)({}, ctx);
  t.same(await call("Version"), { version: "0.1.0" }, "the result passes through");
  await call("Version");
  await t.rejects(call("PodSandboxStatus"), /no such sandbox/, "the error passes through");
  await t.rejects(call("ListContainerStats"), TypeError);
  await t.rejects(call("CheckpointContainer"), /does not implement runtime.v1.RuntimeService\/CheckpointContainer/);
  const { body } = await metrics.render();
  t.equal(sample(body, 'cridock_cri_requests_total{service="RuntimeService",method="Version",code="OK"}'), 2);
  t.equal(sample(body, 'cridock_cri_requests_total{service="RuntimeService",method="PodSandboxStatus",code="NOT_FOUND"}'), 1);
  t.equal(sample(body, 'cridock_cri_requests_total{service="RuntimeService",method="ListContainerStats",code="INTERNAL"}'), 1);
  t.equal(sample(body, 'cridock_cri_requests_total{service="RuntimeService",method="CheckpointContainer",code="UNIMPLEMENTED"}'), 1);
  t.equal(sample(body, 'cridock_cri_request_duration_seconds_count{service="RuntimeService",method="Version"}'), 2);
});

t.test("stream handlers keep their send argument", async (t) => {
  const metrics = new CridockMetrics({ processMetrics: false });
  const sent: unknown[] = [];
  const table = instrumentHandlers("RuntimeService", { StreamContainerStats: async (_req: unknown, _ctx: unknown, send: (m: unknown) => Promise<void>) => send({ n: 1 }) }, metrics);
  await (table.StreamContainerStats as (r: unknown, c: unknown, s: (m: unknown) => Promise<void>) => Promise<void>)({}, {}, async (m) => void sent.push(m));
  t.same(sent, [{ n: 1 }]);
});

t.test("Docker, CNI, pull, log and object series", async (t) => {
  const metrics = new CridockMetrics({ processMetrics: false });
  metrics.dockerRequest("POST", "/containers/abc/start", 0.01, { statusCode: 204 });
  metrics.dockerRequest("POST", "/containers/def/start", 0.02, { statusCode: 404, error: "http" });
  metrics.dockerRequest("GET", "/_ping", 0.5, { error: "unreachable" });
  metrics.imagePull(2, { ok: true, bytes: 1000 });
  metrics.imagePull(1, { ok: false });
  metrics.cniOperation("ADD", 0.2, true);
  metrics.cniOperation("DEL", 0.1, false);
  metrics.setSources({
    objectCounts: () => countObjects(async () => [{ ready: true }, { ready: false }, { ready: true }], async () => [{ state: "running" }, { state: "exited" }]),
    logTotals: () => ({ bytesWritten: 1234, lostEvents: 1, lostBytes: 99 }),
    held: () => ({ logFollowers: { copying: 3, done: 1 }, dockerConnections: { quick: 2, long: 5 } }),
    rootfsSweep: () => ({ released: 4, errors: 2 }),
    ociLayerReregistrations: () => ({ registered: 2, failed: 1, refused: 0 }),
  });
  const { body, contentType } = await metrics.render();
  t.match(contentType, /text\/plain/);
  t.equal(sample(body, 'cridock_docker_request_duration_seconds_count{method="POST",endpoint="/containers/{id}/start"}'), 2, "one series for every container id");
  t.equal(sample(body, 'cridock_docker_request_errors_total{method="POST",endpoint="/containers/{id}/start",reason="404"}'), 1);
  t.equal(sample(body, 'cridock_docker_request_errors_total{method="GET",endpoint="/_ping",reason="unreachable"}'), 1);
  t.equal(sample(body, 'cridock_image_pulls_total{result="success"}'), 1);
  t.equal(sample(body, 'cridock_image_pulls_total{result="failure"}'), 1);
  t.equal(sample(body, "cridock_image_pull_bytes_total"), 1000);
  t.equal(sample(body, 'cridock_cni_operation_duration_seconds_count{operation="ADD"}'), 1);
  t.equal(sample(body, 'cridock_cni_operation_errors_total{operation="DEL"}'), 1);
  t.equal(sample(body, 'cridock_cni_operation_errors_total{operation="ADD"}'), undefined, "no ADD error");
  t.equal(sample(body, 'cridock_pod_sandboxes{state="SANDBOX_READY"}'), 2);
  t.equal(sample(body, 'cridock_pod_sandboxes{state="SANDBOX_NOTREADY"}'), 1);
  t.equal(sample(body, 'cridock_containers{state="CONTAINER_RUNNING"}'), 1);
  t.equal(sample(body, 'cridock_containers{state="CONTAINER_CREATED"}'), 0);
  t.equal(sample(body, "cridock_container_log_bytes_total"), 1234);
  t.equal(sample(body, "cridock_container_log_lost_total"), 1);
  t.equal(sample(body, "cridock_container_log_lost_bytes_total"), 99);
  t.equal(sample(body, 'cridock_log_followers{state="copying"}'), 3);
  t.equal(sample(body, 'cridock_log_followers{state="done"}'), 1);
  t.equal(sample(body, 'cridock_docker_connections{pool="quick"}'), 2);
  t.equal(sample(body, 'cridock_docker_connections{pool="long"}'), 5);
  t.equal(sample(body, "cridock_oci_rootfs_swept_total"), 4);
  t.equal(sample(body, "cridock_oci_rootfs_sweep_errors_total"), 2);
  t.equal(sample(body, 'cridock_oci_layer_reregistrations_total{result="registered"}'), 2);
  t.equal(sample(body, 'cridock_oci_layer_reregistrations_total{result="failed"}'), 1);
  t.equal(sample(body, 'cridock_oci_layer_reregistrations_total{result="refused"}'), 0);
  for (const line of body.split("\n").filter((l) => l.startsWith("# TYPE "))) {
    const [, , name, type] = line.split(" ");
    t.ok(name!.startsWith("cridock_"), `${name} has the prefix`);
    if (type === "counter") t.ok(name!.endsWith("_total"), `${name} is a _total counter`);
  }
});

