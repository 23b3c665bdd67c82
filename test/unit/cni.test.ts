import t from "tap";
import { mkdtemp, mkdir, rm, writeFile, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadNetworkConfig, parseNetworkConfig } from "../../src/network/conf.ts";
import { parseResult, podIps } from "../../src/network/result.ts";
import { execPlugin, pluginEnv, pluginErrorText, pluginStdin, podCniArgs } from "../../src/network/invoke.ts";
import { CniCache } from "../../src/network/cache.ts";

const bridge = { type: "bridge", bridge: "cni0", ipam: { type: "host-local" } };
const portmap = { type: "portmap", capabilities: { portMappings: true } };

t.test("conflist parsing", async (t) => {
  const list = parseNetworkConfig("/x/10-a.conflist", JSON.stringify({ cniVersion: "1.0.0", name: "net", plugins: [bridge, portmap] }));
  t.equal(list.name, "net");
  t.equal(list.cniVersion, "1.0.0");
  t.same(list.plugins.map((p) => p.type), ["bridge", "portmap"]);
  t.same(list.plugins[1]!.capabilities, { portMappings: true });

  const single = parseNetworkConfig("/x/10-a.conf", JSON.stringify({ cniVersion: "0.3.1", name: "one", ...bridge }));
  t.equal(single.plugins.length, 1, "a .conf is a one-plugin list");
  t.equal(single.plugins[0]!.type, "bridge");

  t.throws(() => parseNetworkConfig("/x/a.conf", "{"), /not JSON/);
  t.throws(() => parseNetworkConfig("/x/a.conf", JSON.stringify({ type: "bridge" })), /no network name/);
  t.throws(() => parseNetworkConfig("/x/a.conflist", JSON.stringify({ name: "n", plugins: [] })), /no plugins/);
  t.throws(() => parseNetworkConfig("/x/a.conflist", JSON.stringify({ name: "n", cniVersion: "9.9.9", plugins: [bridge] })), /cniVersion 9.9.9/);
  t.throws(() => parseNetworkConfig("/x/a.conflist", JSON.stringify({ name: "n", plugins: [{ type: "../evil" }] })), /no valid "type"/);
});

t.test("conf dir loading picks the first valid config by name", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-conf-"));
  const bin = join(dir, "bin");
  const conf = join(dir, "conf");
  await mkdir(bin);
  await mkdir(conf);
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const name of ["bridge", "portmap"]) {
    await writeFile(join(bin, name), "#!/bin/sh\n");
    await chmod(join(bin, name), 0o755);
  }
  let loaded = await loadNetworkConfig(conf, [join(dir, "nope"), bin]);
  t.notOk(loaded.config, "an empty dir has no config");
  t.match(loaded.problems.join(), /no network config found/);

  await writeFile(join(conf, "05-broken.conflist"), "not json");
  await writeFile(join(conf, "07-missing.conflist"), JSON.stringify({ name: "m", cniVersion: "1.0.0", plugins: [{ type: "flannel" }] }));
  await writeFile(join(conf, "20-good.conflist"), JSON.stringify({ name: "good", cniVersion: "1.0.0", plugins: [bridge, portmap] }));
  await writeFile(join(conf, "10-ok.json"), JSON.stringify({ name: "ok", cniVersion: "0.4.0", ...bridge }));
  await writeFile(join(conf, "00-ignored.txt"), "whatever");
  loaded = await loadNetworkConfig(conf, [join(dir, "nope"), bin]);
  t.equal(loaded.config?.name, "ok", "10-ok.json sorts before 20-good.conflist and is valid");
  t.equal(loaded.problems.length, 2, "broken and missing-binary files are reported");
  t.match(loaded.problems[1], /flannel not found/);
});

t.test("results of every supported version", async (t) => {
  const v1 = parseResult(
    JSON.stringify({
      cniVersion: "1.0.0",
      interfaces: [{ name: "cni0", mac: "aa" }, { name: "veth1" }, { name: "eth0", sandbox: "/run/netns/x" }],
      ips: [
        { address: "fd00::5/64", interface: 2 },
        { address: "10.89.0.5/16", gateway: "10.89.0.1", interface: 2 },
        { address: "10.89.0.1/16", interface: 0 },
      ],
      routes: [{ dst: "0.0.0.0/0" }],
    }),
    "1.0.0",
  );
  t.same(podIps(v1), ["10.89.0.5", "fd00::5"], "IPv4 first, host-side addresses dropped");
  t.equal(v1.routes[0]!.dst, "0.0.0.0/0");

  const v03 = parseResult(JSON.stringify({ cniVersion: "0.3.1", ips: [{ version: "4", address: "10.1.0.2/24" }] }), "0.3.1");
  t.same(podIps(v03), ["10.1.0.2"], "an IP without interface index counts");

  const v02 = parseResult(JSON.stringify({ ip4: { ip: "10.2.0.3/24", gateway: "10.2.0.1" } }), "0.2.0");
  t.same(podIps(v02), ["10.2.0.3"]);

  t.throws(() => parseResult("nope", "1.0.0"), /not JSON/);
  t.throws(() => parseResult(JSON.stringify({ ips: [{ address: "10.0.0.1" }] }), "1.0.0"), /not a CIDR/);
});

t.test("plugin stdin and environment", async (t) => {
  const list = parseNetworkConfig("/x/a.conflist", JSON.stringify({ cniVersion: "1.0.0", name: "net", plugins: [bridge, { ...portmap, runtimeConfig: { stale: 1 } }] }));
  const caps = { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp", hostIP: "" }], bandwidth: { ingressRate: 1 } };
  const first = pluginStdin(list, list.plugins[0]!, caps, undefined);
  t.same(first, { ...bridge, name: "net", cniVersion: "1.0.0" }, "no capabilities declared: no runtimeConfig");
  const prev = { cniVersion: "1.0.0", ips: [] };
  const second = pluginStdin(list, list.plugins[1]!, caps, prev);
  t.same(second.runtimeConfig, { portMappings: caps.portMappings }, "only declared capabilities are passed");
  t.same(second.prevResult, prev, "prevResult is chained");
  t.equal(second.name, "net");

  const args = podCniArgs({ name: "web", namespace: "default", uid: "u-1" }, "abc");
  const env = pluginEnv("ADD", { containerId: "abc", netnsPath: "/ns/abc", ifName: "eth0", args, binDirs: ["/a", "/b"] });
  t.equal(env.CNI_COMMAND, "ADD");
  t.equal(env.CNI_CONTAINERID, "abc");
  t.equal(env.CNI_NETNS, "/ns/abc");
  t.equal(env.CNI_IFNAME, "eth0");
  t.equal(env.CNI_PATH, "/a:/b");
  t.equal(env.CNI_ARGS, "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1");
});

t.test("plugin errors keep the plugin's message and stderr", async (t) => {
  t.equal(pluginErrorText(JSON.stringify({ code: 11, msg: "no IP", details: "range full" }), "warn\n", 1), "no IP: range full (CNI error code 11); stderr: warn");
  t.equal(pluginErrorText("", "", 2), "exit status 2");

  const dir = await mkdtemp(join(tmpdir(), "cridock-plugin-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const failing = join(dir, "failing");
  await writeFile(failing, '#!/bin/sh\ncat >/dev/null\necho \'{"code":7,"msg":"boom"}\'\necho "from stderr" >&2\nexit 1\n');
  await chmod(failing, 0o755);
  await t.rejects(execPlugin("plugin failing ADD", { binary: failing, env: {}, stdin: "{}", timeoutMs: 10_000 }), /plugin failing ADD failed: boom \(CNI error code 7\); stderr: from stderr/);

  const slow = join(dir, "slow");
  await writeFile(slow, "#!/bin/sh\nexec sleep 30\n");
  await chmod(slow, 0o755);
  await t.rejects(execPlugin("plugin slow ADD", { binary: slow, env: {}, stdin: "{}", timeoutMs: 200 }), /timed out after 200 ms/);

  const echo = join(dir, "echo");
  await writeFile(echo, "#!/bin/sh\necho \"$CNI_COMMAND\"\ncat\n");
  await chmod(echo, 0o755);
  t.equal(await execPlugin("echo", { binary: echo, env: { CNI_COMMAND: "DEL" }, stdin: '{"a":1}', timeoutMs: 10_000 }), 'DEL\n{"a":1}');
});

t.test("result cache round trip", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-cache-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const cache = new CniCache(dir);
  const entry = {
    kind: "cniCacheV1" as const,
    containerId: "abc",
    ifName: "eth0",
    networkName: "net",
    config: Buffer.from("{}").toString("base64"),
    cniArgs: [["IgnoreUnknown", "1"]] as [string, string][],
    capabilityArgs: {},
    netns: "/ns",
    result: { ips: [] },
  };
  await cache.write(entry);
  t.same(await cache.read("net", "abc", "eth0"), entry);
  await cache.remove("net", "abc", "eth0");
  t.equal(await cache.read("net", "abc", "eth0"), undefined);
  // The directory is made once; one removed meanwhile (an operator's cleanup) is made again.
  await rm(join(dir, "results"), { recursive: true });
  await cache.write(entry);
  t.same(await cache.read("net", "abc", "eth0"), entry, "a write after results/ went missing makes it again");
});
