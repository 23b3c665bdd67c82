/**
 * The self-contained executable (dist/cridock-linux-x64, `npm run
 * build:binary`) runs on a machine with no Node.js: copied alone into a
 * scratch folder and started from another, empty one, with an empty PATH and
 * an empty environment, in a mount namespace where the node binary and every
 * node_modules folder of this machine (this checkout included) are covered
 * up. It prints its version, starts, and answers a CRI Version call with the
 * engine under test behind it.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CriClient } from "../helpers/cri-client.ts";
import { REPO_ROOT, spawnBuiltCridock } from "../helpers/cridock-process.ts";
import { TEST_DOCKER_ENDPOINT } from "../helpers/env.ts";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { embeddedRuntimeLinePattern, versionLinePattern } from "../helpers/version-line.ts";

const BINARY = join(REPO_ROOT, "dist/cridock-linux-x64");
if (!existsSync(BINARY)) throw new Error(`${BINARY} is missing: npm run build:binary builds it (scripts/test.sh does)`);

/** Where node and node modules can be found on this machine: each is covered in the namespace. */
const NODE_FILES = [process.execPath, "/usr/bin/node", "/usr/bin/nodejs", "/usr/local/bin/node"].filter((p, i, all) => existsSync(p) && all.indexOf(p) === i);
const NODE_DIRS = [REPO_ROOT.replace(/\/$/, ""), "/usr/lib/node_modules", "/usr/local/lib/node_modules", "/usr/share/nodejs", "/root/.npm"].filter((p) => existsSync(p));

const scratch = await mkdtemp(join(tmpdir(), "cridock-sea-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));
const binDir = join(scratch, "bin");
const emptyDir = join(scratch, "empty");
await mkdir(binDir);
await mkdir(emptyDir);
const executable = join(binDir, "cridock");
await copyFile(BINARY, executable);
spawnSync("chmod", ["0755", executable]);

/**
 * A shell script that covers node up in a private mount namespace, goes to
 * the empty folder and runs `command` there with no environment at all.
 */
function isolated(command: string): string[] {
  const cover = [
    ...NODE_FILES.map((f) => `mount --bind /dev/null '${f}'`),
    ...NODE_DIRS.map((d) => `mount -t tmpfs -o size=1m,mode=0755 cridock-sea-test '${d}'`),
  ].join(" && ");
  return ["--mount", "--propagation", "private", "/bin/sh", "-c", `set -e; ${cover}; cd '${emptyDir}'; exec /usr/bin/env -i PATH= ${command}`];
}

t.test("node is out of reach inside the namespace", async (t) => {
  const probe = spawnSync("unshare", isolated(`/bin/sh -c 'for n in ${NODE_FILES.join(" ")}; do [ -s "$n" ] && echo "$n"; done; /usr/bin/find ${NODE_DIRS.join(" ")} -mindepth 1 -maxdepth 1; command -v node || true'`), { encoding: "utf8" });
  t.equal(probe.status, 0, probe.stderr);
  t.equal(probe.stderr, "", "the probe itself ran (find is named by its path: PATH is empty)");
  t.equal(probe.stdout.trim(), "", "no node binary, no node_modules, no checkout, nothing on PATH");
  t.ok(NODE_FILES.includes(process.execPath) && NODE_DIRS.includes(REPO_ROOT.replace(/\/$/, "")), "the node running this test and this checkout are among what is covered");
  // Outside the namespace the same probe finds them: the covering is what hides them.
  const outside = spawnSync("/usr/bin/find", [REPO_ROOT, "-mindepth", "1", "-maxdepth", "1", "-name", "node_modules"], { encoding: "utf8" });
  t.match(outside.stdout, /node_modules/, "outside it, this checkout's node_modules is there");
});

t.test("--version", async (t) => {
  const r = spawnSync("unshare", isolated(`'${executable}' --version`), { encoding: "utf8", timeout: 30_000 });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, versionLinePattern(), "the version and the commit baked in at build time");
  t.equal(r.stderr, "", "no warning from Node's single-executable support");
});

t.test("it is the pinned Node, as cridock check reports, and NODE_OPTIONS does not reach it", async (t) => {
  const check = spawnSync(
    "unshare",
    isolated(`'${executable}' check --docker-endpoint=${TEST_DOCKER_ENDPOINT} --network-plugin=no-op --root-directory=${join(scratch, "check-root")} --container-runtime-endpoint=unix://${join(scratch, "check.sock")}`),
    { encoding: "utf8", timeout: 120_000 },
  );
  t.match(check.stdout, embeddedRuntimeLinePattern(executable), check.stdout + check.stderr);
  // A NODE_OPTIONS node would obey (a missing preload fails the start) is ignored: execArgvExtension "none".
  const r = spawnSync("unshare", isolated(`/usr/bin/env NODE_OPTIONS=--require=/nonexistent.cjs '${executable}' --version`), { encoding: "utf8", timeout: 30_000 });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, versionLinePattern(), "its version and commit");
  t.equal(r.stderr, "", "not a word about the preload");
  // The same NODE_OPTIONS stops the machine's node: the test would tell if it were not ignored.
  const node = spawnSync(process.execPath, ["-e", "0"], { env: { ...process.env, NODE_OPTIONS: "--require=/nonexistent.cjs" }, encoding: "utf8" });
  t.not(node.status, 0, "a node that takes NODE_OPTIONS fails on it");
});

t.test("starts and answers a CRI Version call", async (t) => {
  const socket = join(emptyDir, "cri.sock");
  const started = process.hrtime.bigint();
  const { child, stderr, exited } = spawnBuiltCridock(
    t,
    "unshare",
    isolated(
      [
        `'${executable}'`,
        `--container-runtime-endpoint=unix://${socket}`,
        `--root-directory=${join(scratch, "root")}`,
        `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`,
        "--network-plugin=no-op",
        "--cri-dockerd-root-directory=",
        "--log-level=warn",
      ].join(" "),
    ),
  );

  const client = new CriClient(socket);
  let version: { version: string; runtimeName: string; runtimeVersion: string; runtimeApiVersion: string } | undefined;
  for (let i = 0; i < 300 && !version && child.exitCode === null; i++) {
    version = await client.call("Version", {}).catch(() => undefined);
    if (!version) await new Promise((r) => setTimeout(r, 50));
  }
  const servingMs = Number(process.hrtime.bigint() - started) / 1e6;
  client.close();
  t.ok(version, `the executable served Version (stderr: ${stderr()})`);
  t.same(version && { version: version.version, runtimeName: version.runtimeName, runtimeApiVersion: version.runtimeApiVersion }, {
    version: "0.1.0",
    runtimeName: "docker",
    runtimeApiVersion: "v1",
  });
  t.match(version?.runtimeVersion ?? "", /^\d+\.\d+/, "with the engine's version");
  t.comment(`start to serving Version: ${servingMs.toFixed(0)} ms; executable ${(statSync(BINARY).size / 1024 / 1024).toFixed(1)} MiB`);
  child.kill("SIGTERM");
  t.equal(await exited, 0, "SIGTERM: exits 0");
  // A start that serves but failed a step (say, resuming log writers) says so at error level.
  t.notMatch(stderr(), /"level":"(error|fatal)"/, "it logged no error");
  t.same(await readdir(emptyDir), [], "it leaves nothing in the folder it ran from (the socket is removed)");
});
