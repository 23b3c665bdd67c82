import t from "tap";
import { withoutRuntime, withRuntime } from "../../../src/oci/daemon-config.ts";

t.test("withRuntime adds the runtime and keeps the operator's settings", async (t) => {
  t.equal(withRuntime(undefined, "cridock", "/l"), '{\n  "runtimes": {\n    "cridock": {\n      "path": "/l"\n    }\n  }\n}\n');
  t.same(JSON.parse(withRuntime("  \n", "cridock", "/l")!), { runtimes: { cridock: { path: "/l" } } });
  const operator = JSON.stringify({ "log-driver": "journald", runtimes: { nvidia: { path: "nvidia-container-runtime" } }, "exec-opts": ["native.cgroupdriver=systemd"] });
  const out = withRuntime(operator, "cridock", "/l")!;
  t.same(JSON.parse(out), {
    "log-driver": "journald",
    runtimes: { nvidia: { path: "nvidia-container-runtime" }, cridock: { path: "/l" } },
    "exec-opts": ["native.cgroupdriver=systemd"],
  });
  t.same(Object.keys(JSON.parse(out)), ["log-driver", "runtimes", "exec-opts"], "key order kept");
  t.equal(withRuntime(out, "cridock", "/l"), undefined, "already registered: nothing to write");
  t.same(JSON.parse(withRuntime(out, "cridock", "/other")!).runtimes.cridock, { path: "/other" }, "a moved launcher replaces the entry");
});

t.test("a daemon.json that is not a JSON object is refused, never overwritten", async (t) => {
  t.throws(() => withRuntime("{ nope", "cridock", "/l", "/etc/docker/daemon.json"), /\/etc\/docker\/daemon.json is not JSON/);
  t.throws(() => withRuntime("[1]", "cridock", "/l"), /not a JSON object/);
  t.throws(() => withRuntime('{"runtimes": "runc"}', "cridock", "/l"), /"runtimes" is not an object/);
  t.throws(() => withoutRuntime("{ nope", "cridock"), /not JSON/);
});

t.test("withoutRuntime removes only the runtime, leaving runtimes for dockerd's reload to see", async (t) => {
  t.equal(withoutRuntime(undefined, "cridock"), undefined);
  t.equal(withoutRuntime('{"debug":true}', "cridock"), undefined, "not registered: nothing to write");
  t.same(JSON.parse(withoutRuntime('{"debug":true,"runtimes":{"cridock":{"path":"/l"}}}', "cridock")!), { debug: true, runtimes: {} });
  t.same(JSON.parse(withoutRuntime('{"runtimes":{"cridock":{"path":"/l"},"nvidia":{"path":"n"}}}', "cridock")!), { runtimes: { nvidia: { path: "n" } } });
});

t.test("a default-runtime that names the layer is refused: its launcher would run itself", async (t) => {
  t.throws(() => withRuntime('{"default-runtime":"cridock"}', "cridock", "/l", "/etc/docker/daemon.json"), /\/etc\/docker\/daemon.json makes "cridock" dockerd's default-runtime/);
  t.same(JSON.parse(withRuntime('{"default-runtime":"runc"}', "cridock", "/l")!), { "default-runtime": "runc", runtimes: { cridock: { path: "/l" } } });
  t.throws(() => withoutRuntime('{"default-runtime":"cridock","runtimes":{"cridock":{"path":"/l"}}}', "cridock"), /default-runtime/);
});
