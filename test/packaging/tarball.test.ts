/**
 * The release tarball (dist/cridock-<version>-linux-amd64.tar.gz, `npm run
 * build:tarball`) for nodes that are not Debian: it holds the executable,
 * the units, the flags file, the default CNI network and a README, and the
 * README's install commands work as written. They run in a private mount
 * namespace whose /usr/local/bin, /etc/systemd/system, /etc/default and
 * /etc/cni are empty scratch filesystems, so the host is not touched; the
 * systemctl lines are left out (systemd is not PID 1 here) and the units
 * are checked with `systemd-analyze verify` instead.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { versionLinePattern } from "../helpers/version-line.ts";

const NAME = `cridock-${CRIDOCK_VERSION}-linux-amd64`;
const TARBALL = join(REPO_ROOT, `dist/${NAME}.tar.gz`);
if (!existsSync(TARBALL)) throw new Error(`${TARBALL} is missing: npm run build:tarball builds it (scripts/test.sh does)`);

const scratch = await mkdtemp(join(tmpdir(), "cridock-tarball-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

t.test("the tarball holds the executable, the units, the flags file, the network and a README", async (t) => {
  const list = spawnSync("tar", ["-tzf", TARBALL], { encoding: "utf8" });
  t.equal(list.status, 0, list.stderr);
  t.same(
    list.stdout.split("\n").filter(Boolean).sort(),
    [
      `${NAME}/`,
      `${NAME}/README.md`,
      `${NAME}/bundled-licenses.txt`,
      `${NAME}/cni/`,
      `${NAME}/cni/10-cridock.conflist`,
      `${NAME}/cni/99-loopback.conf`,
      `${NAME}/cridock`,
      `${NAME}/cridock.default`,
      `${NAME}/cridock.service`,
      `${NAME}/cridock.socket`,
    ],
  );
  t.equal(spawnSync("tar", ["-xzf", TARBALL, "-C", scratch]).status, 0);
  t.match(spawnSync(join(scratch, NAME, "cridock"), ["--version"], { encoding: "utf8", env: {} }).stdout, versionLinePattern());
});

t.test("the README's install commands work as written", async (t) => {
  const readme = await readFile(join(scratch, NAME, "README.md"), "utf8");
  t.match(readme, new RegExp(`^# cridock ${CRIDOCK_VERSION.replace(/\./g, "\\.")} for Linux on amd64`, "m"), "the version is filled in");
  t.match(readme, /^Built from commit [0-9a-f]{40}(-dirty)?\.$/m, "and the commit");
  const block = /## Install, as root\n\n```sh\n([\s\S]*?)```/.exec(readme)?.[1];
  t.ok(block, "the README has an install block");
  const commands = (block ?? "").split("\n").filter((l) => !/^systemctl /.test(l)).join("\n");
  const covered = ["/usr/local/bin", "/etc/systemd/system", "/etc/default", "/etc/cni"];
  const script = [
    "set -e",
    ...covered.map((d) => `mkdir -p ${d} && mount -t tmpfs -o mode=0755 cridock-tarball-test ${d}`),
    `cd '${join(scratch, NAME)}'`,
    // check's FAIL lines (say, a pause image this host lacks) exit 1; the commands themselves must run.
    commands.replace(/^cridock check.*$/m, "cridock check --log-level=error || [ $? -eq 1 ]"),
    "ls -l /usr/local/bin/cridock",
    "systemd-analyze verify /etc/systemd/system/cridock.socket /etc/systemd/system/cridock.service",
    "cat /etc/default/cridock",
    "ls /etc/cni/net.d",
  ].join("\n");
  const r = spawnSync("unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script], {
    encoding: "utf8",
    timeout: 180_000,
    env: { PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" },
  });
  t.equal(r.status, 0, r.stdout + r.stderr);
  t.match(r.stdout, /^-rwxr-xr-x .* \/usr\/local\/bin\/cridock$/m, "the executable is installed");
  t.match(r.stdout, /^(OK|WARN|FAIL) +docker /m, "cridock check ran from /usr/local/bin");
  t.match(r.stdout, /^CRIDOCK_OPTS=""$/m, "the flags file");
  t.match(r.stdout, /^10-cridock\.conflist\n99-loopback\.conf$/m, "the default CNI network, into an empty /etc/cni/net.d");
  t.notMatch(r.stderr, /cridock\.(socket|service):/, "systemd-analyze verify has nothing to say about the units");
});
