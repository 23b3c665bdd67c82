/**
 * The server's re-registration of the layer (src/oci/layer-reregister.ts)
 * against a temporary daemon.json and a fake dockerd: a child process whose
 * pid is in the pid file and which, on SIGHUP, "reloads" daemon.json (what
 * /info then shows is read from the file as of its last SIGHUP), as dockerd
 * does with its runtimes.
 */
import t, { type Test } from "tap";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { parseConfig } from "../../../src/config.ts";
import { createLogger } from "../../../src/log.ts";
import { renderLauncher } from "../../../src/oci/launcher.ts";
import { OciLayerLookup } from "../../../src/oci/layer.ts";
import { LayerReregistrar } from "../../../src/oci/layer-reregister.ts";
import { removeRecord, writeRecord, type LayerRegistration } from "../../../src/oci/registration-record.ts";

const CRIDOCK = ["/usr/bin/cridock"];

interface FakeDockerd {
  child: ChildProcess;
  /** How many SIGHUPs it has had. */
  hups(): number;
  /** /info as a dockerd that read daemon.json at its last SIGHUP (or start) would answer. */
  info(): Promise<{ Runtimes: Record<string, { path?: string }>; DefaultRuntime: string }>;
  /** minikube's move: daemon.json written whole without the layer, and dockerd "restarted" (reads it again). */
  rewriteAndRestart(text: string): void;
}

async function fakeDockerd(t: Test, dir: string, daemonJson: string, pidFile: string): Promise<FakeDockerd> {
  const log = join(dir, "hups");
  writeFileSync(log, "");
  const script = `
    const fs = require("node:fs");
    process.on("SIGHUP", () => fs.appendFileSync(${JSON.stringify(log)}, "HUP\\n"));
    process.stdout.write("ready\\n");
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  t.teardown(() => child.kill("SIGKILL"));
  await once(child.stdout!, "data");
  writeFileSync(pidFile, `${child.pid}\n`);
  let loaded = "";
  let seenHups = 0;
  const read = () => (existsSync(daemonJson) ? readFileSync(daemonJson, "utf8") : "");
  loaded = read();
  const hups = () => readFileSync(log, "utf8").split("\n").filter(Boolean).length;
  return {
    child,
    hups,
    async info() {
      const now = hups();
      if (now !== seenHups) {
        seenHups = now;
        loaded = read();
      }
      const runtimes = loaded ? (JSON.parse(loaded).runtimes ?? {}) : {};
      return { Runtimes: { runc: { path: "runc" }, ...runtimes }, DefaultRuntime: "runc" };
    },
    rewriteAndRestart(text: string) {
      writeFileSync(daemonJson, text);
      loaded = text;
    },
  };
}

async function setup(t: Test, options: { minIntervalMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "cridock-rereg-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const runc = join(dir, "runc");
  writeFileSync(runc, "#!/bin/sh\n");
  chmodSync(runc, 0o755);
  const registration: LayerRegistration = {
    launcher: join(dir, "oci-runtime"),
    daemonJson: join(dir, "daemon.json"),
    dockerPidFile: join(dir, "docker.pid"),
    delegate: runc,
    editsDir: join(dir, "edits"),
    rootfsDir: join(dir, "rootfs"),
  };
  writeFileSync(registration.launcher, renderLauncher({ ...registration, cridock: CRIDOCK }), { mode: 0o755 });
  const installed = JSON.stringify({ "log-driver": "journald", runtimes: { cridock: { path: registration.launcher } } });
  writeFileSync(registration.daemonJson, installed, { mode: 0o600 });
  const recordPath = join(dir, "oci-layer.json");
  await writeRecord(recordPath, registration);
  const dockerd = await fakeDockerd(t, dir, registration.daemonJson, registration.dockerPidFile);
  const registered: number[] = [];
  const lines: string[] = [];
  const log = createLogger("info", { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream);
  const reregistrar = new LayerReregistrar({
    recordPath,
    info: () => dockerd.info(),
    cridock: CRIDOCK,
    log,
    onRegistered: () => registered.push(Date.now()),
    minIntervalMs: options.minIntervalMs ?? 60_000,
    reloadTimeoutMs: 5_000,
    pollMs: 20,
  });
  t.teardown(() => reregistrar.stop());
  return { dir, registration, recordPath, dockerd, reregistrar, registered, lines };
}

const MINIKUBE_DAEMON_JSON = JSON.stringify({ "exec-opts": ["native.cgroupdriver=systemd"], "log-driver": "json-file", "storage-driver": "overlay2" }, null, 2);

t.test("minikube's rewrite: the layer is registered again, with a SIGHUP, logged and counted", async (t) => {
  const { registration, dockerd, reregistrar, registered, lines } = await setup(t);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  let attempt: Promise<void> | undefined;
  const lookup = new OciLayerLookup(() => dockerd.info(), () => undefined, (reason) => (attempt = reregistrar.layerNotReady(reason)));
  t.equal(await lookup.current({ quiet: true }), undefined, "the layer is gone");
  t.ok(attempt, "the lookup's answer started a re-registration");
  await attempt;
  t.equal(dockerd.hups(), 1, "dockerd got one SIGHUP");
  const written = JSON.parse(readFileSync(registration.daemonJson, "utf8"));
  t.same(written, { "exec-opts": ["native.cgroupdriver=systemd"], "log-driver": "json-file", "storage-driver": "overlay2", runtimes: { cridock: { path: registration.launcher } } }, "the tool's settings are kept, the layer added");
  t.equal(statSync(registration.daemonJson).mode & 0o777, 0o600, "the mode the file had is kept");
  t.same(reregistrar.counts(), { registered: 1, failed: 0, refused: 0 });
  t.equal(registered.length, 1, "the lookup is told");
  lookup.forget();
  t.equal((await lookup.current())?.launcher, registration.launcher, "and finds the layer again");
  t.match(lines.join(""), /registered the OCI runtime layer with dockerd again/);
  t.match(lines.join(""), /"reason":"dockerd has no runtime named/, "logged with the reason");
});

t.test("at most one attempt per interval; the one asked for meanwhile runs when it ends", async (t) => {
  const { dockerd, reregistrar } = await setup(t, { minIntervalMs: 400 });
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("first");
  t.equal(dockerd.hups(), 1);
  // The tool restarts dockerd again at once, with its file again.
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("second");
  await reregistrar.layerNotReady("third");
  t.equal(dockerd.hups(), 1, "nothing within the interval");
  t.same(reregistrar.counts(), { registered: 1, failed: 0, refused: 0 });
  for (let i = 0; i < 100 && reregistrar.counts().registered < 2; i++) await sleep(20);
  t.equal(dockerd.hups(), 2, "the deferred attempt ran once the interval ended");
  t.same(reregistrar.counts(), { registered: 2, failed: 0, refused: 0 });
});

t.test("failures in a row double the interval: a dockerd that never takes it is not signalled and polled for ever", async (t) => {
  const { registration, dockerd, reregistrar } = await setup(t, { minIntervalMs: 400 });
  rmSync(registration.dockerPidFile);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("gone");
  t.same(reregistrar.counts(), { registered: 0, failed: 1, refused: 0 }, "no dockerd to signal: failed");
  t.match(readFileSync(registration.daemonJson, "utf8"), /cridock/, "daemon.json has it, for dockerd's next start");
  await sleep(450);
  await reregistrar.layerNotReady("still gone");
  t.same(reregistrar.counts(), { registered: 0, failed: 1, refused: 0 }, "past the first interval, within the doubled one: no attempt");
  for (let i = 0; i < 150 && reregistrar.counts().failed < 2; i++) await sleep(20);
  t.same(reregistrar.counts(), { registered: 0, failed: 2, refused: 0 }, "the deferred attempt ran when the doubled interval ended");
  writeFileSync(registration.dockerPidFile, `${dockerd.child.pid}\n`);
  await sleep(1700);
  await reregistrar.layerNotReady("gone");
  t.equal(reregistrar.counts().registered, 1, "and a later one succeeds once dockerd can be signalled");
});

t.test("no record (never installed, uninstalled, CRIDOCK_OCI_LAYER=no): nothing is registered", async (t) => {
  const { registration, recordPath, dockerd, reregistrar } = await setup(t);
  await removeRecord(recordPath);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("gone");
  t.equal(readFileSync(registration.daemonJson, "utf8"), MINIKUBE_DAEMON_JSON, "daemon.json untouched");
  t.equal(dockerd.hups(), 0, "no SIGHUP");
  t.same(reregistrar.counts(), { registered: 0, failed: 0, refused: 0 });
});

t.test("a record anyone else could write is refused", async (t) => {
  const { registration, recordPath, dockerd, reregistrar } = await setup(t);
  chmodSync(recordPath, 0o666);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("gone");
  t.equal(readFileSync(registration.daemonJson, "utf8"), MINIKUBE_DAEMON_JSON);
  t.same(reregistrar.counts(), { registered: 0, failed: 0, refused: 1 });
});

t.test("a launcher that is gone is written again as install wrote it; a file that is not cridock's is refused", async (t) => {
  const { registration, dockerd, reregistrar } = await setup(t, { minIntervalMs: 0 });
  const original = readFileSync(registration.launcher, "utf8");
  rmSync(registration.launcher);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("gone");
  t.equal(readFileSync(registration.launcher, "utf8"), original, "the launcher is back, the same script");
  t.equal(statSync(registration.launcher).mode & 0o777, 0o755);
  t.same(reregistrar.counts(), { registered: 1, failed: 0, refused: 0 });
  writeFileSync(registration.launcher, "#!/bin/sh\nexec something-else \"$@\"\n");
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  await reregistrar.layerNotReady("gone again");
  t.equal(readFileSync(registration.daemonJson, "utf8"), MINIKUBE_DAEMON_JSON, "not registered: the file at the launcher's path is not cridock's");
  t.match(readFileSync(registration.launcher, "utf8"), /something-else/, "and it is left alone");
  t.same(reregistrar.counts(), { registered: 1, failed: 0, refused: 1 });
});

t.test("a tool's daemon.json that makes cridock the default runtime is refused, untouched", async (t) => {
  const { registration, dockerd, reregistrar } = await setup(t);
  const text = JSON.stringify({ "default-runtime": "cridock" });
  dockerd.rewriteAndRestart(text);
  rmSync(registration.launcher);
  await reregistrar.layerNotReady("gone");
  t.equal(readFileSync(registration.daemonJson, "utf8"), text);
  t.notOk(existsSync(registration.launcher), "the launcher written for it went again");
  t.equal(dockerd.hups(), 0);
  t.same(reregistrar.counts(), { registered: 0, failed: 0, refused: 1 });
});

t.test("an uninstall that takes the record away while the server re-registers wins", async (t) => {
  const { registration, recordPath, dockerd, reregistrar } = await setup(t);
  dockerd.rewriteAndRestart(MINIKUBE_DAEMON_JSON);
  // The record goes between the server's first read of it and its write (under daemon.json's lock).
  const info = dockerd.info.bind(dockerd);
  let calls = 0;
  (reregistrar as unknown as { options: { info: () => Promise<unknown> } }).options.info = async () => {
    if (calls++ === 0) await removeRecord(recordPath);
    return info();
  };
  await reregistrar.layerNotReady("gone");
  t.equal(readFileSync(registration.daemonJson, "utf8"), MINIKUBE_DAEMON_JSON, "not re-added");
  t.same(reregistrar.counts(), { registered: 0, failed: 0, refused: 1 });
});

t.test("the lookup hands every not-ready answer to the re-registration, quiet or not; forget asks dockerd again", async (t) => {
  const reasons: string[] = [];
  const runtimes: Record<string, { path: string }> = {};
  let calls = 0;
  const lookup = new OciLayerLookup(async () => (calls++, { Runtimes: runtimes }), () => undefined, (reason) => reasons.push(reason));
  await lookup.current({ quiet: true });
  await lookup.current();
  t.equal(calls, 1, "cached");
  t.equal(reasons.length, 1);
  t.match(reasons[0], /no runtime named "cridock"/);
  lookup.forget();
  await lookup.current({ quiet: true });
  t.equal(calls, 2, "forget: dockerd is asked again (a dockerd that came back)");
  t.equal(reasons.length, 2);
});

t.test("--oci-layer-reregister: on by default, false turns it off, anything else is refused", async (t) => {
  const config = (argv: string[]) => {
    const r = parseConfig(argv);
    if (r.kind !== "config") throw new Error("not a config");
    return r.config;
  };
  t.equal(config([]).ociLayerReregister, true);
  t.equal(config(["--oci-layer-reregister=false"]).ociLayerReregister, false);
  t.equal(config(["--oci-layer-reregister", "true"]).ociLayerReregister, true);
  t.throws(() => config(["--oci-layer-reregister=no"]), /oci-layer-reregister.*not one of true, false/);
});
