/**
 * scripts/install.sh and uninstall.sh as an operator runs them, into
 * private directories (npm prefix, unit dir, CNI dir, manifest) so the host
 * is not touched: `npm pack` → `npm install -g` gives a working `cridock`
 * (runtime dependencies only, nothing fetched at start), the installed units
 * pass `systemd-analyze verify` (systemd is not PID 1 here, so they are
 * verified, not booted; the fd and notify paths have their own test), the
 * default CNI network is installed only where none exists, and uninstall
 * removes exactly what install added.
 */
import t from "tap";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtemp, mkdir, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../helpers/cridock-process.ts";
import { cridockTestFlags, makeCniConfDir } from "../../helpers/env.ts";
import { escapeRegExp } from "../../helpers/regexp.ts";
import { versionLinePattern } from "../../helpers/version-line.ts";

const scratch = await mkdtemp(join(tmpdir(), "cridock-install-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

function layout(name: string) {
  const dir = join(scratch, name);
  return {
    dir,
    env: {
      ...process.env,
      CRIDOCK_PREFIX: join(dir, "prefix"),
      SYSTEMD_UNIT_DIR: join(dir, "units"),
      CRIDOCK_DEFAULTS: join(dir, "default", "cridock"),
      CNI_CONF_DIR: join(dir, "cni"),
      CRIDOCK_MANIFEST: join(dir, "state", "install-manifest"),
      // The OCI layer goes into a daemon.json of the test's (outside `dir`: uninstall leaves the
      // file, with an empty runtimes), and no dockerd is signalled.
      CRIDOCK_OCI_LAYER_FLAGS: [
        `--daemon-json=${join(scratch, `${name}-daemon.json`)}`,
        `--docker-pid-file=${join(dir, "no-dockerd.pid")}`,
        `--docker-endpoint=unix://${join(dir, "no-docker.sock")}`,
        `--launcher=${join(dir, "state", "oci-runtime")}`,
        `--edits-dir=${join(dir, "state", "oci-edits")}`,
        `--registration=${join(dir, "state", "oci-layer.json")}`,
        "--runtime=/bin/true",
      ].join(" "),
    },
  };
}

function script(name: string, env: NodeJS.ProcessEnv, ...args: string[]) {
  return spawnSync("bash", [join(REPO_ROOT, "scripts", name), ...args], { env, encoding: "utf8", timeout: 300_000 });
}

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() || entry.isSymbolicLink()) out.push(join(entry.parentPath, entry.name).slice(dir.length));
  }
  return out.sort();
}

t.test("the packed tarball holds the sources, the proto and the units, no tests", async (t) => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json"], { cwd: REPO_ROOT, encoding: "utf8" });
  const paths = (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
  for (const needed of ["bin/cridock.js", "dist/cridock.js", "src/main.ts", "proto/runtime/v1/api.proto", "packaging/systemd/cridock.service", "packaging/systemd/cridock.socket", "scripts/install.sh", "scripts/cni/10-cridock.conflist"]) {
    t.ok(paths.includes(needed), `${needed} is packed`);
  }
  t.notOk(paths.some((p) => p.startsWith("test/") || p.startsWith("node_modules/")), "no tests or modules are packed");
  const pkg = JSON.parse(await readFile(join(REPO_ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  t.ok(pkg.dependencies.tsx && pkg.dependencies["prom-client"], "what bin/cridock.js needs at run time is a runtime dependency");
});

t.test("install → run → uninstall on an empty node", async (t) => {
  const { dir, env } = layout("fresh");
  const install = script("install.sh", env);
  t.equal(install.status, 0, install.stderr);
  const bin = join(env.CRIDOCK_PREFIX!, "bin", "cridock");
  t.match(execFileSync(bin, ["--version"], { encoding: "utf8" }), versionLinePattern(), "the installed command runs and says its version and commit");

  const service = await readFile(join(env.SYSTEMD_UNIT_DIR!, "cridock.service"), "utf8");
  t.match(service, new RegExp(`^ExecStart=${escapeRegExp(process.execPath)} \\S+/lib/node_modules/cridock/bin/cridock\\.js --container-runtime-endpoint=fd:// \\$CRIDOCK_OPTS$`, "m"));
  const socket = await readFile(join(env.SYSTEMD_UNIT_DIR!, "cridock.socket"), "utf8");
  t.match(socket, /^SocketMode=0660$/m);
  t.match(service, /^Type=notify$/m);
  t.match(service, /^Requires=cridock\.socket$/m);
  t.match(service, /^Wants=network-online\.target docker\.service$/m, "Docker wanted, not required: its restart does not stop cridock");
  t.match(service, /^Restart=on-failure$/m);
  const verify = spawnSync("systemd-analyze", ["verify", join(env.SYSTEMD_UNIT_DIR!, "cridock.socket"), join(env.SYSTEMD_UNIT_DIR!, "cridock.service")], { encoding: "utf8" });
  t.equal(verify.status, 0, verify.stderr);
  t.equal(verify.stdout + verify.stderr, "", "systemd-analyze verify has nothing to say about the units");

  t.same(await readdir(env.CNI_CONF_DIR!), ["10-cridock.conflist", "99-loopback.conf"], "the default CNI network was installed");
  t.match(await readFile(env.CRIDOCK_DEFAULTS!, "utf8"), /^CRIDOCK_OPTS=""$/m);
  const daemonJson = join(scratch, "fresh-daemon.json");
  const launcher = join(dir, "state", "oci-runtime");
  t.same(JSON.parse(await readFile(daemonJson, "utf8")), { runtimes: { cridock: { path: launcher } } }, "the OCI layer is registered in daemon.json");
  t.match(await readFile(launcher, "utf8"), /^#!\/bin\/sh\n# cridock OCI runtime layer/, "its launcher is written");

  // The installed command checks this node like the checkout does (test CNI network, private root).
  const cni = await makeCniConfDir();
  t.teardown(() => cni.cleanup());
  const check = spawnSync(bin, ["check", ...cridockTestFlags(cni), `--root-directory=${join(dir, "root")}`, `--container-runtime-endpoint=unix://${join(dir, "cri.sock")}`], { encoding: "utf8", timeout: 120_000 });
  t.equal(check.status, 0, check.stdout + check.stderr);

  const uninstall = script("uninstall.sh", env);
  t.equal(uninstall.status, 0, uninstall.stderr);
  t.same(await files(dir).then((f) => f.filter((p) => !p.startsWith("/root"))), [], "nothing install.sh added is left");
  t.same(JSON.parse(await readFile(daemonJson, "utf8")), { runtimes: {} }, "the OCI layer is unregistered");
  await t.rejects(stat(bin), "the command is gone");
});

t.test("an existing CNI network and flags file are left alone", async (t) => {
  const { env } = layout("existing");
  await mkdir(env.CNI_CONF_DIR!, { recursive: true });
  await mkdir(join(env.CRIDOCK_DEFAULTS!, ".."), { recursive: true });
  await writeFile(join(env.CNI_CONF_DIR!, "10-mine.conflist"), "{}\n");
  await writeFile(env.CRIDOCK_DEFAULTS!, 'CRIDOCK_OPTS="--log-level=debug"\n');
  const install = script("install.sh", env);
  t.equal(install.status, 0, install.stderr);
  t.same(await readdir(env.CNI_CONF_DIR!), ["10-mine.conflist"], "no default network added beside the operator's");
  t.match(install.stderr, /already holds a network config/);
  const uninstall = script("uninstall.sh", env);
  t.equal(uninstall.status, 0, uninstall.stderr);
  t.same(await readdir(env.CNI_CONF_DIR!), ["10-mine.conflist"], "the operator's network survives uninstall");
  t.equal(await readFile(env.CRIDOCK_DEFAULTS!, "utf8"), 'CRIDOCK_OPTS="--log-level=debug"\n', "and so does their flags file");
  t.same(await readdir(env.SYSTEMD_UNIT_DIR!), [], "the units are gone");
});

t.test("uninstall without an install says so", async (t) => {
  const { env } = layout("never");
  const r = script("uninstall.sh", env);
  t.equal(r.status, 1);
  t.match(r.stderr, /nothing installed by scripts\/install\.sh here/);
});
