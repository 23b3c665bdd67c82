/**
 * The Debian package (dist/cridock_<version>_amd64.deb, `npm run build:deb`)
 * as an operator meets it: lintian finds no error; `dpkg -i` puts the
 * executable, the units and the conffile in place and the default CNI
 * network only where /etc/cni/net.d holds none; the units pass
 * `systemd-analyze verify` (systemd is not PID 1 here: they are verified,
 * not booted, and deb-systemd-invoke starts nothing); the installed
 * /usr/bin/cridock serves crictl against the engine under test; remove
 * then purge leave nothing the package installed, except pods' state under
 * /var/lib/cridock, which goes only with CRIDOCK_PURGE_STATE=yes. Install,
 * remove and purge are the commands docs/install.md gives (apt-get).
 * postinst registers cridock's OCI runtime layer with this machine's own
 * dockerd (Debian's 20.10 on /var/run/docker.sock, reloaded with SIGHUP,
 * not restarted) and removal unregisters it; /etc/docker/daemon.json is
 * put back as it was afterwards.
 */
import t from "tap";
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, spawnBuiltCridock } from "../helpers/cridock-process.ts";
import { CRICTL, PAUSE_IMAGE, TEST_DOCKER_ENDPOINT, cridockTestFlags, makeCniConfDir } from "../helpers/env.ts";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { versionLinePattern } from "../helpers/version-line.ts";
import { pinnedNode } from "../../scripts/build/node-runtime.ts";

const DEB = join(REPO_ROOT, `dist/cridock_${CRIDOCK_VERSION}_amd64.deb`);
if (!existsSync(DEB)) throw new Error(`${DEB} is missing: npm run build:deb builds it (scripts/test.sh does)`);
const CNI_DIR = "/etc/cni/net.d";
const STATE_DIR = "/var/lib/cridock";
/** Warnings lintian gives and docs/install.md explains; a new one fails the test so it gets explained too. */
const KNOWN_WARNINGS = ["hardening-no-pie"];

function run(command: string, args: string[], env: Record<string, string> = {}, cwd = REPO_ROOT): SpawnSyncReturns<string> {
  return spawnSync(command, args, { encoding: "utf8", timeout: 300_000, cwd, env: { ...process.env, DEBIAN_FRONTEND: "noninteractive", ...env } });
}

/** apt-get as the docs run it; -y, and waiting for dpkg's lock should another install be under way. */
function apt(...args: string[]): SpawnSyncReturns<string> {
  const env: Record<string, string> = args.includes("--purge-state") ? { CRIDOCK_PURGE_STATE: "yes" } : {};
  return run("apt-get", ["-y", "-o", "DPkg::Lock::Timeout=120", ...args.filter((a) => a !== "--purge-state")], env);
}
const DEB_ARG = `./dist/cridock_${CRIDOCK_VERSION}_amd64.deb`;

/** Every path under the places dpkg and deb-systemd-helper write that names cridock (the test environment's own cridock-env paths aside). */
function cridockPaths(): string[] {
  const r = run("find", ["/etc", "/lib/systemd", "/usr/bin", "/usr/share", "/usr/lib/systemd", "/var/lib/systemd", "/var/lib/dpkg/info", "-name", "*cridock*", "-not", "-name", "*cridock-env*"]);
  return r.stdout.split("\n").filter(Boolean).sort();
}

function cniNetworks(): string[] {
  return existsSync(CNI_DIR) ? readdirSync(CNI_DIR).sort() : [];
}

const installed = run("dpkg-query", ["-W", "-f=${Status}", "cridock"]);
if (installed.stdout.includes("installed")) throw new Error("a cridock package is installed on this machine already; this test installs and purges its own");
if (existsSync("/etc/default/cridock")) throw new Error("/etc/default/cridock exists already (scripts/install.sh's?); the package would take it over");

const DAEMON_JSON = "/etc/docker/daemon.json";
const before = {
  paths: cridockPaths(),
  cni: cniNetworks(),
  cniDirExisted: existsSync("/etc/cni"),
  stateDirExisted: existsSync(STATE_DIR),
  daemonJson: existsSync(DAEMON_JSON) ? await readFile(DAEMON_JSON, "utf8") : undefined,
};
t.teardown(async () => {
  // Whatever happened above, the package does not stay on the machine.
  if (run("dpkg-query", ["-W", "-f=${Status}", "cridock"]).stdout.includes("installed")) run("dpkg", ["--purge", "cridock"]);
  // The node's dockerd has dropped the layer (prerm's uninstall); its configuration file goes back as it was.
  if (before.daemonJson === undefined) await rm(DAEMON_JSON, { force: true });
  else await writeFile(DAEMON_JSON, before.daemonJson);
});

/** What dockerd on /var/run/docker.sock lists under the layer's runtime name (postinst registered it there). */
function layerRuntime(): string | undefined {
  const info = run("curl", ["-sf", "--unix-socket", "/var/run/docker.sock", "http://docker/info"]);
  return (JSON.parse(info.stdout || "{}") as { Runtimes?: Record<string, { path?: string }> }).Runtimes?.cridock?.path;
}

t.test("lintian: no error, and only the warnings the docs explain", async (t) => {
  const r = run("lintian", ["--fail-on", "error", "--suppress-tags", "spelling-error-in-binary", DEB]);
  t.equal(r.status, 0, `lintian: ${r.stdout}${r.stderr}`);
  const tags = r.stdout.split("\n").filter((l) => /^[EW]: /.test(l));
  t.same(tags.filter((l) => l.startsWith("E: ")), [], "no error");
  t.same(tags.filter((l) => l.startsWith("W: ")).map((l) => l.split(" ")[2]).filter((tag) => !KNOWN_WARNINGS.includes(tag!)), [], "no unexplained warning");
});

t.test("apt-get install ./dist/cridock_<version>_amd64.deb installs the executable, the units, the conffile and the default network", async (t) => {
  const fields = run("dpkg-deb", ["-f", DEB, "Package", "Version", "Architecture", "Depends", "Recommends", "Description"]);
  t.match(fields.stdout, new RegExp(`Node\\.js\\s+v${pinnedNode().version.replace(/\./g, "\\.")}\\s+inside`), "the description names the Node inside");
  t.match(fields.stdout, new RegExp(`^Version: ${CRIDOCK_VERSION.replace(/\./g, "\\.")}$`, "m"));
  t.match(fields.stdout, /^Depends: .*docker\.io \(>= 20\.10\) \| docker-ce \(>= 5:20\.10\) \| moby-engine/m);
  t.match(fields.stdout, /^Recommends: containernetworking-plugins \| kubernetes-cni/m);
  t.match(run("dpkg-deb", ["-f", DEB, "Description"]).stdout, new RegExp(`This build is cridock ${CRIDOCK_VERSION.replace(/\./g, "\\.")}, from commit\n [0-9a-f]{40}(-dirty)?\\.$`, "m"), "the description names the version and the commit");

  const i = apt("install", DEB_ARG);
  t.equal(i.status, 0, i.stdout + i.stderr);
  t.ok(existsSync("/usr/bin/cridock"), "/usr/bin/cridock");
  t.match(run("/usr/bin/cridock", ["--version"]).stdout, versionLinePattern());
  const service = await readFile("/lib/systemd/system/cridock.service", "utf8");
  t.match(service, /^ExecStart=\/usr\/bin\/cridock --container-runtime-endpoint=fd:\/\/ \$CRIDOCK_OPTS$/m);
  t.match(await readFile("/lib/systemd/system/cridock.socket", "utf8"), /^ListenStream=\/run\/cridock\.sock$/m);
  t.match(run("dpkg-query", ["-W", "-f=${Conffiles}", "cridock"]).stdout, /^ \/etc\/default\/cridock [0-9a-f]{32}$/m, "/etc/default/cridock is a conffile");
  t.match(await readFile("/etc/default/cridock", "utf8"), /^CRIDOCK_OPTS=""$/m);

  const verify = run("systemd-analyze", ["verify", "/lib/systemd/system/cridock.socket", "/lib/systemd/system/cridock.service"]);
  t.equal(verify.status, 0, verify.stderr);
  t.equal(verify.stdout + verify.stderr, "", "systemd-analyze verify has nothing to say about the units");

  t.equal(layerRuntime(), "/var/lib/cridock/oci-runtime", "postinst registered the OCI runtime layer with the node's dockerd (SIGHUP)");
  t.ok(existsSync(join(STATE_DIR, "oci-layer.json")), "and recorded it, for cridock to register it again should a tool rewrite daemon.json");
  // Docker's runc by name, as the shim finds Docker's own (src/oci/launcher.ts): not the path the node has now.
  t.match(run("/usr/bin/cridock", ["oci-layer", "status"]).stdout, /^ready: runtime "cridock" → \/var\/lib\/cridock\/oci-runtime, real runtime runc$/m);
  t.ok(existsSync("/etc/systemd/system/sockets.target.wants/cridock.socket"), "deb-systemd-helper enabled the socket");
  t.ok(existsSync("/etc/systemd/system/multi-user.target.wants/cridock.service"), "and the service");
  if (before.cni.some((f) => /\.(conf|conflist|json)$/.test(f))) {
    t.same(cniNetworks(), before.cni, "an existing CNI network is left alone");
  } else {
    t.same(cniNetworks(), [...before.cni, "10-cridock.conflist", "99-loopback.conf"].sort(), "the default CNI network, since there was none");
  }
});

t.test("the installed cridock serves crictl against the engine under test", async (t) => {
  const scratch = await mkdtemp(join(tmpdir(), "cridock-deb-"));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const cni = await makeCniConfDir();
  t.teardown(() => cni.cleanup());
  const socket = join(scratch, "cri.sock");
  const { child, stderr, exited } = spawnBuiltCridock(t, "/usr/bin/cridock", [
    ...cridockTestFlags(cni),
    `--container-runtime-endpoint=unix://${socket}`,
    `--root-directory=${join(scratch, "root")}`,
    `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`,
    "--cri-dockerd-root-directory=",
    "--log-level=warn",
  ]);
  const crictl = (...args: string[]) => run(CRICTL, ["--runtime-endpoint", `unix://${socket}`, "--timeout", "60s", ...args]);
  let version = crictl("version");
  for (let i = 0; i < 100 && version.status !== 0 && child.exitCode === null; i++) {
    await new Promise((r) => setTimeout(r, 100));
    version = crictl("version");
  }
  t.equal(version.status, 0, version.stderr + stderr());
  t.match(version.stdout, /RuntimeName:\s+docker/);
  t.match(version.stdout, /RuntimeApiVersion:\s+v1/);

  const podConfig = join(scratch, "pod.json");
  const uid = `deb-${process.pid}-${Date.now()}`;
  await writeFile(podConfig, JSON.stringify({ metadata: { name: "deb-test", namespace: "cridock-deb-test", uid, attempt: 0 }, log_directory: join(scratch, "logs"), linux: {} }));
  await mkdir(join(scratch, "logs"));
  const runp = crictl("runp", podConfig);
  t.equal(runp.status, 0, runp.stderr + stderr());
  const podId = runp.stdout.trim();
  const inspect = crictl("inspectp", "-o", "json", podId);
  t.equal(JSON.parse(inspect.stdout).status.state, "SANDBOX_READY", "the pod is ready");
  t.match(JSON.parse(inspect.stdout).status.network.ip, /^\d+\.\d+\.\d+\.\d+$/, "with an IP from CNI");
  t.equal(crictl("stopp", podId).status, 0);
  t.equal(crictl("rmp", podId).status, 0);
  t.equal(crictl("pods", "-q", "--namespace", "cridock-deb-test").stdout.trim(), "", "the pod is gone");
  t.comment(`pause image: ${PAUSE_IMAGE}`);
  child.kill("SIGTERM");
  t.equal(await exited, 0, "SIGTERM: exits 0");
  t.notMatch(stderr(), /"level":"(error|fatal)"/, "it logged no error");
});

t.test("apt-get remove, then purge: nothing the package installed is left; pods' state stays", async (t) => {
  // What a node's running pods would leave in the state directory; only where this test
  // made the directory, so a real node's state is never at stake.
  const podState = join(STATE_DIR, "sandbox/deb-test-pod.json");
  if (!before.stateDirExisted) {
    await mkdir(join(STATE_DIR, "sandbox"), { recursive: true });
    await writeFile(podState, "{}\n");
    t.teardown(() => rm(STATE_DIR, { recursive: true, force: true }));
  }

  const r = apt("remove", "cridock");
  t.equal(r.status, 0, r.stdout + r.stderr);
  t.notOk(existsSync("/usr/bin/cridock"), "remove: the executable is gone");
  t.notOk(existsSync("/lib/systemd/system/cridock.service"), "and the units");
  t.ok(existsSync("/etc/default/cridock"), "the conffile stays until purge");
  t.equal(layerRuntime(), undefined, "remove: the OCI runtime layer is unregistered from dockerd");
  t.notOk(existsSync(join(STATE_DIR, "oci-runtime")), "and its launcher removed (no container used it)");
  t.notOk(existsSync(join(STATE_DIR, "oci-layer.json")), "and install's record of it: nothing registers it again");

  const p = apt("purge", "cridock");
  t.equal(p.status, 0, p.stdout + p.stderr);
  t.notOk(existsSync("/etc/default/cridock"), "purge: the conffile is gone");
  t.same(cniNetworks(), before.cni, "the default CNI network it installed is gone, anything else is as it was");
  t.equal(existsSync("/etc/cni"), before.cniDirExisted, "the CNI directories it created are gone");
  t.notOk(existsSync(join(STATE_DIR, "deb-default-cni")), "its record of them too");
  t.same(cridockPaths(), before.paths, "no file, unit link or dpkg record of the package is left");
  if (before.stateDirExisted) {
    t.comment(`${STATE_DIR} existed before this test: purging with CRIDOCK_PURGE_STATE=yes is not tried on it`);
    return;
  }
  t.ok(existsSync(podState), "pods' state stays after purge");

  // Asked to, purge removes the state too.
  t.equal(apt("install", DEB_ARG).status, 0);
  const purge = apt("purge", "cridock", "--purge-state");
  t.equal(purge.status, 0, purge.stdout + purge.stderr);
  t.notOk(existsSync(STATE_DIR), "CRIDOCK_PURGE_STATE=yes: the state directory is gone");
  t.same(cridockPaths(), before.paths, "and again nothing of the package is left");
  t.same(cniNetworks(), before.cni);
});
