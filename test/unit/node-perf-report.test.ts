/**
 * scripts/bench/node-perf-report.ts: how the node performance specs' perf
 * data files (test/e2e/perftype's PerfData) become one table per run, and the
 * cAdvisor image the specs pull (scripts/env/images/node-perf-images.ts).
 */
import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeItem, pointsOf, readPoints, table, type PerfData } from "../../scripts/bench/node-perf-report.ts";
import { CADVISOR_IMAGE, nodePerfCatalog } from "../../scripts/env/images/node-perf-images.ts";

const latency = (p50: number, test = "density_create_batch_10_0_0_5"): PerfData => ({
  dataItems: [
    { data: { Perc90: p50 * 2, Perc50: p50 }, unit: "ms", labels: { latencytype: "create-pod", datatype: "latency", node: "n1", timestamp: "1" } },
  ],
  labels: { test, node: "n1" },
});

t.test("a data item is named by its own labels, sorted, without the node and the time", async (t) => {
  t.equal(describeItem(latency(1).dataItems[0]!), "datatype=latency latencytype=create-pod");
  t.equal(describeItem({ data: {}, unit: "MB" }), "");
});

t.test("points: one per bucket, in bucket order, under the spec's test name", async (t) => {
  t.same(pointsOf(latency(800), "file.json"), [
    { test: "density_create_batch_10_0_0_5", what: "datatype=latency latencytype=create-pod", bucket: "Perc50", unit: "ms", value: 800 },
    { test: "density_create_batch_10_0_0_5", what: "datatype=latency latencytype=create-pod", bucket: "Perc90", unit: "ms", value: 1600 },
  ]);
  t.equal(pointsOf({ dataItems: [{ data: { x: 1 }, unit: "u" }] }, "performance-cpu-x.json")[0]!.test, "performance-cpu-x.json", "no test label: the file names it");
});

t.test("readPoints reads only the perf data files of a results directory", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "node-perf-report-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, "performance-latency--density_create_batch_10_0_0_5.json"), JSON.stringify(latency(500)));
  await writeFile(join(dir, "time_series--density.json"), JSON.stringify({ op_series: [] }));
  await writeFile(join(dir, "report.json"), "[]");
  t.same(readPoints(dir).map((p) => p.value), [500, 1000]);
});

t.test("the table: a column per run, the first ÷ the second, a dash where a run lacks a point", async (t) => {
  const cridock = pointsOf(latency(800), "a");
  const other = pointsOf(latency(400), "b").slice(0, 1);
  const lines = table([
    { name: "cridock", points: cridock },
    { name: "cri-dockerd", points: other },
  ]);
  t.equal(lines[0], "| test | measured | bucket | unit | cridock | cri-dockerd | cridock ÷ cri-dockerd |");
  t.equal(lines[2], "| density_create_batch_10_0_0_5 | datatype=latency latencytype=create-pod | Perc50 | ms | 800 | 400 | 2.00 |");
  t.equal(lines[3], "| density_create_batch_10_0_0_5 | datatype=latency latencytype=create-pod | Perc90 | ms | 1600 | – | – |");
  const single = table([{ name: "cridock", points: cridock }]);
  t.equal(single[0], "| test | measured | bucket | unit | cridock |", "one run: no ratio column");
  t.equal(single[2], "| density_create_batch_10_0_0_5 | datatype=latency latencytype=create-pod | Perc50 | ms | 800 |");
});

t.test("the cAdvisor image: the name the suite hard-codes, upstream's entrypoint, registry-only", async (t) => {
  const [image, ...rest] = nodePerfCatalog("/nonexistent");
  t.equal(rest.length, 0);
  t.same(image!.tags, [CADVISOR_IMAGE]);
  t.equal(CADVISOR_IMAGE, "gcr.io/cadvisor/cadvisor:v0.47.2", "resource_collector.go's cadvisorImageName at v1.36");
  t.same(image!.config.Entrypoint, ["/usr/bin/cadvisor", "-logtostderr"]);
  t.ok(image!.registryOnly);
});
