/**
 * The .deb on a node as operators run it: cgroup v2, systemd as PID 1,
 * Debian's docker.io with the systemd cgroup driver (the cgroup v2 node of
 * scripts/vm/node.sh; this host is neither). The package is built here on
 * the host as scripts/test.sh builds it, copied into the guest and
 * installed the way docs/install.md says (`apt-get install
 * ./cridock_<version>_amd64.deb`); then its units run under the real
 * systemd, `cridock check` passes and crictl reaches the socket systemd
 * listens on.
 *
 * Needs root, the host packages scripts/vm/node.sh installs, and the
 * image (built on first use, about 15 minutes; then a boot of 2-3 minutes).
 */
import t from "tap";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CRICTL } from "../helpers/env.ts";
import { ensureDebInstalled, GUEST_CRICTL, loadImage, suiteDeb, suiteNode, writePauseArchive } from "../helpers/vm-node.ts";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { embeddedRuntimeLinePattern, versionLinePattern } from "../helpers/version-line.ts";

const started = Date.now();
const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;
const scratch = await mkdtemp(join(tmpdir(), "cridock-vm-package-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));
const pauseArchive = join(scratch, "pause.tar");
// The boot (guest CPU) and the builds (host CPU) side by side.
const [booted, built, pause] = await Promise.allSettled([suiteNode(t, "package"), suiteDeb(), writePauseArchive(pauseArchive)]);
if (booted.status === "rejected") throw booted.reason;
const vm = booted.value;
if (built.status === "rejected") throw built.reason;
if (pause.status === "rejected") throw pause.reason;
const deb = built.value;
t.comment(`VM booted, .deb and pause image built in ${seconds(started)}`);
// A node that has no cridock yet (a shared node may have had it from an earlier file).
await vm.run("if dpkg-query -W cridock >/dev/null 2>&1; then apt-get purge -y cridock >/dev/null 2>&1; fi", { timeoutMs: 300_000 });

t.test("the node is cgroup v2 with systemd as PID 1", async (t) => {
  t.equal((await vm.run("stat -fc %T /sys/fs/cgroup")).trim(), "cgroup2fs", "/sys/fs/cgroup is cgroup2");
  t.equal((await vm.run("cat /proc/1/comm")).trim(), "systemd", "PID 1 is systemd");
  t.notMatch(await vm.run("cat /proc/cmdline"), /unified_cgroup_hierarchy/, "without systemd.unified_cgroup_hierarchy on the kernel command line");
  // Which node this is (CRIDOCK_VM_DEBIAN picks bookworm or trixie): the versions the results go with.
  const versions = await vm.run(
    `. /etc/os-release; echo "$PRETTY_NAME, kernel $(uname -r), systemd $(systemctl --version | sed -n '1s/^systemd \\([0-9]*\\).*/\\1/p'), ` +
      `docker.io $(dpkg-query -W -f='\${Version}' docker.io), runc $(dpkg-query -W -f='\${Version}' runc), containerd $(dpkg-query -W -f='\${Version}' containerd), Engine API $(docker version --format '{{.Server.APIVersion}}')"`,
  );
  t.comment(`node: ${versions.trim()}`);
});

t.test("apt-get install ./cridock_<version>_amd64.deb, with no network", async (t) => {
  const since = Date.now();
  const out = (await ensureDebInstalled(vm, deb)) ?? "";
  t.comment(`installed in ${seconds(since)}`);
  const fetched = out.split("\n").filter((l) => /^(Get|Err|Ign|Hit):/.test(l));
  t.same(fetched.filter((l) => !l.includes(`/root/cridock_${CRIDOCK_VERSION}_amd64.deb`)), [], "apt fetched nothing but the .deb itself: the dependencies are in the image");
  t.match(out, /^Setting up cridock \(/m, "dpkg set the package up", { output: out });
  t.match(await vm.run("cridock --version"), versionLinePattern());
});

t.test("systemd runs cridock.socket and cridock.service", async (t) => {
  // postinst starts both and waits for the service's readiness; a slow
  // guest gets a bounded while more.
  let active = "";
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    active = (await vm.ssh("systemctl is-active cridock.socket cridock.service")).stdout;
    if (active === "active\nactive\n") break;
    await new Promise((r) => setTimeout(r, 3000));
  }
  const status: string = (await vm.ssh("systemctl status --no-pager cridock.socket cridock.service docker.service")).stdout;
  t.equal(active, "active\nactive\n", "both active", { status });
  t.equal((await vm.run("systemctl is-enabled cridock.socket cridock.service")), "enabled\nenabled\n", "both enabled");
  t.comment(`system state: ${(await vm.ssh("systemctl is-system-running")).stdout.trim()}`);
});

t.test("cridock check passes and reports the systemd driver on cgroup v2", async (t) => {
  // The node has its pause image as an operator's would (the guest pulls nothing).
  await loadImage(vm, pauseArchive);
  const r = await vm.ssh("cridock check", { timeoutMs: 180_000 });
  t.equal(r.status, 0, "cridock check exits 0", { output: r.stdout + r.stderr });
  t.match(r.stdout, /^OK +cgroup +driver systemd, cgroup v2;/m, "cgroup: driver systemd, cgroup v2");
  t.match(r.stdout, /cridock can serve pods on this node/);
  // The package's executable runs the pinned Node LTS, never the node of the machine that built it.
  t.match(r.stdout, embeddedRuntimeLinePattern("/usr/bin/cridock"), "runtime: the pinned Node, embedded in /usr/bin/cridock");
});

const noCrictl = existsSync(CRICTL) ? false : `${CRICTL} is missing (scripts/env/install-cri-tools.sh builds it): crictl's look at the socket is skipped`;
t.test("crictl info answers on /var/run/cridock.sock", { skip: noCrictl }, async (t) => {
  await vm.copy(CRICTL, "/usr/local/bin/crictl");
  const r = await vm.ssh(`${GUEST_CRICTL} info`, { timeoutMs: 180_000 });
  t.equal(r.status, 0, "crictl info exits 0", { stderr: r.stderr });
  const info = JSON.parse(r.stdout) as { status: { conditions: { type: string; status: boolean }[] } };
  const conditions = Object.fromEntries(info.status.conditions.map((c) => [c.type, c.status]));
  t.same(conditions, { RuntimeReady: true, NetworkReady: true }, "runtime and network ready (the package's default CNI network)");
});
