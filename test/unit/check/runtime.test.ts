import t from "tap";
import { readFileSync } from "node:fs";
import { OLDEST_NODE_LINE, runtimeItem as judge, type NodeFacts } from "../../../src/check/evaluate.ts";
import { probeRuntime } from "../../../src/check/runtime.ts";

const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { engines: { node: string } };

function runtimeItem(runtime: NodeFacts["runtime"]) {
  const found = judge({ runtime });
  if (found.name !== "runtime") throw new Error(`item ${found.name}, not runtime`);
  return found;
}

t.test("the floor check warns about is package.json's engines floor", async (t) => {
  t.equal(pkg.engines.node, `>=${OLDEST_NODE_LINE}`);
});

t.test("the runtime this test runs on is what the probe reports", async (t) => {
  const facts = probeRuntime();
  t.equal(facts.name, "node");
  t.equal(facts.version, process.version);
  t.equal(facts.v8, process.versions.v8);
  t.equal(facts.path, process.execPath);
  t.equal(facts.selfContained, false, "tap runs the sources, not the executable");
});

t.test("the executable's Node, a Node of the floor or newer, and Deno are OK and named", async (t) => {
  const embedded = runtimeItem({ name: "node", version: "v26.12.1", v8: "14.6", path: "/usr/bin/cridock", selfContained: true });
  t.equal(embedded.verdict, "ok");
  t.equal(embedded.detail, "Node.js v26.12.1 (V8 14.6) embedded in /usr/bin/cridock");
  const installed = runtimeItem({ name: "node", version: `v${OLDEST_NODE_LINE}.0.0`, v8: "14.6", path: "/usr/local/bin/node", selfContained: false });
  t.equal(installed.verdict, "ok");
  t.match(installed.detail, /at \/usr\/local\/bin\/node$/);
  const deno = runtimeItem({ name: "deno", version: "2.9.6", v8: "14.5", path: "/usr/bin/deno", selfContained: false });
  t.equal(deno.verdict, "ok");
  t.equal(deno.detail, "Deno 2.9.6 (V8 14.5) at /usr/bin/deno");
});

t.test("a Node older than the floor is a warning with the fix", async (t) => {
  const old = runtimeItem({ name: "node", version: "v20.20.2", v8: "11.3", path: "/usr/bin/node", selfContained: false });
  t.equal(old.verdict, "warn");
  t.match(old.detail, new RegExp(`older than Node ${OLDEST_NODE_LINE}`));
  t.match(old.fix, /cridock package/);
  t.equal(runtimeItem({ name: "node", version: "garbage", v8: "?", path: "/x", selfContained: false }).verdict, "warn", "a version it cannot read is not taken as new enough");
});
