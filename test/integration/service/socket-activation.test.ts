/**
 * cridock as cridock.socket + cridock.service run it, with systemd's roles
 * played by systemd-socket-activate (fd 3, LISTEN_FDS/LISTEN_PID) and a
 * socat NOTIFY_SOCKET listener: the first CRI call starts cridock and is
 * answered on the inherited socket, READY=1 arrives once it serves, SIGTERM
 * sends STOPPING=1 and exits 0 within the grace period, leaving systemd's
 * socket file alone.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../helpers/cridock-process.ts";
import { activationScenario } from "../../helpers/systemd-fakes.ts";

t.test("socket activation and readiness under Node", (t) => activationScenario(t, "node"));

t.test("fd:// without a passed socket refuses to start and says why", async (t) => {
  const result = spawnSync(process.execPath, [join(REPO_ROOT, "bin/cridock.js"), "--container-runtime-endpoint=fd://", "--network-plugin=no-op", `--root-directory=${join(tmpdir(), "cridock-nofd")}`], {
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, LISTEN_FDS: "", LISTEN_PID: "" },
  });
  t.equal(result.status, 1);
  t.match(result.stdout + result.stderr, /LISTEN_FDS is not set\): start cridock through cridock\.socket/);
});
