import t from "tap";
import { applySpecEdits, parseSpecEdits } from "../../../src/oci/spec-edits.ts";

t.test("parseSpecEdits takes the known shape only", async (t) => {
  t.same(parseSpecEdits('{"version":1,"unified":{"memory.oom.group":"1","memory.swap.max":"0"}}'), {
    version: 1,
    unified: { "memory.oom.group": "1", "memory.swap.max": "0" },
  });
  t.same(parseSpecEdits('{"version":1}'), { version: 1 });
  t.throws(() => parseSpecEdits("not json"), /not JSON/);
  t.throws(() => parseSpecEdits("[]"), /not a JSON object/);
  t.throws(() => parseSpecEdits('{"version":2}'), /version 2 is not 1/);
  t.throws(() => parseSpecEdits('{"version":1,"process":{}}'), /carry process, which this layer does not know/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":[]}'), /unified is not an object/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"../memory.max":"1"}}'), /not a cgroup v2 interface file name/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"cgroup.procs":"1"}}'), /not a cgroup v2 interface file name/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":"1\\n2"}}'), /one line/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":5}}'), /one line/);
  t.throws(() => parseSpecEdits('{"version":1,"unified":{"memory.max":""}}'), /one line/);
});

t.test("applySpecEdits merges unified into linux.resources, keeping everything else", async (t) => {
  const spec = { ociVersion: "1.0.2", process: { args: ["sh"] }, linux: { resources: { memory: { limit: 1 }, unified: { "memory.high": "5", "memory.max": "9" } }, namespaces: [] } };
  const out = applySpecEdits(structuredClone(spec), { version: 1, unified: { "memory.oom.group": "1", "memory.max": "7" } });
  t.same(out, { ...spec, linux: { ...spec.linux, resources: { memory: { limit: 1 }, unified: { "memory.high": "5", "memory.max": "7", "memory.oom.group": "1" } } } });
  t.same(applySpecEdits({}, { version: 1, unified: { "memory.oom.group": "1" } }), { linux: { resources: { unified: { "memory.oom.group": "1" } } } });
  t.same(applySpecEdits({ a: 1 }, { version: 1 }), { a: 1 }, "no edits, no change");
  t.throws(() => applySpecEdits([], { version: 1 }), /not a JSON object/);
  t.throws(() => applySpecEdits({ linux: "x" }, { version: 1, unified: { "memory.max": "1" } }), /linux field/);
});
