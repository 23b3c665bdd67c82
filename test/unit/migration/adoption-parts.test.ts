/**
 * Pieces of the cri-dockerd takeover that need no engine: reading a pod's
 * addresses from `ip -j addr` output, and replacing cri-dockerd's log
 * symlink by a file without touching the file it points to.
 */
import t from "tap";
import { lstat, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseIpAddrCidrs, parseIpAddrJson, resultFromAddresses } from "../../../src/network/pod-ips.ts";
import { replaceSymlinkWithFile } from "../../../src/runtime/sandbox/logs-takeover.ts";

t.test("ip -j addr: global addresses of eth0, IPv4 first", async (t) => {
  const out = JSON.stringify([
    { ifname: "lo", addr_info: [{ family: "inet", local: "127.0.0.1", scope: "host" }] },
    {
      ifname: "eth0",
      addr_info: [
        { family: "inet6", local: "fd00::5", scope: "global" },
        { family: "inet6", local: "fe80::1", scope: "link" },
        { family: "inet", local: "10.89.0.7", prefixlen: 16, scope: "global" },
      ],
    },
    { ifname: "eth1", addr_info: [{ family: "inet", local: "192.168.1.2", scope: "global" }] },
  ]);
  t.same(parseIpAddrJson(out, "eth0"), ["10.89.0.7", "fd00::5"]);
  t.same(parseIpAddrCidrs(out, "eth0"), ["10.89.0.7/16", "fd00::5/128"], "prefix length kept (full length when absent)");
  t.same(resultFromAddresses("1.0.0", "/run/ns", "eth0", ["10.89.0.7/16"]), {
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0", sandbox: "/run/ns" }],
    ips: [{ address: "10.89.0.7/16", interface: 0 }],
  });
  t.match(resultFromAddresses("0.3.1", "/run/ns", "eth0", ["fd00::5/64"]).ips, [{ version: "6" }], "0.3.x results name the IP version");
  t.same(parseIpAddrJson("[]", "eth0"), []);
  t.throws(() => parseIpAddrJson("oops", "eth0"), /not JSON/);
  t.throws(() => parseIpAddrJson("{}", "eth0"), /not print a list/);
});

t.test("log symlink → empty file; the json log it pointed to is untouched", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "takeover-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const target = join(dir, "docker-json.log");
  await writeFile(target, '{"log":"a\\n","stream":"stdout","time":"2024-01-01T00:00:00Z"}\n');
  const link = join(dir, "0.log");
  await symlink(target, link);
  t.equal(await replaceSymlinkWithFile(link), true);
  t.notOk((await lstat(link)).isSymbolicLink());
  t.equal(await readFile(link, "utf8"), "", "a new, empty file");
  t.match(await readFile(target, "utf8"), /"log":"a/, "Docker's log untouched");
  t.equal(await replaceSymlinkWithFile(link), false, "a regular file is not taken over twice");
  t.equal(await replaceSymlinkWithFile(join(dir, "absent.log")), false);
});
