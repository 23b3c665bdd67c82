/**
 * `cridock check` on this machine: the test environment's configuration
 * (dockerd, test CNI network, pause image present) passes; broken ones fail
 * on exactly the items that are broken, with a fix, and exit 1.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../helpers/cridock-process.ts";
import { BUSYBOX_IMAGE, REGISTRY, TEST_DOCKER_ENDPOINT, cridockTestFlags, makeCniConfDir } from "../../helpers/env.ts";
import { readOomScoreFacts } from "../../../src/runtime/container/oom-score.ts";

function check(...flags: string[]) {
  const result = spawnSync(process.execPath, [join(REPO_ROOT, "bin/cridock.js"), "check", ...flags], { encoding: "utf8", timeout: 120_000 });
  const lines = result.stdout.split("\n").filter(Boolean);
  const verdict = (name: string) => lines.find((l) => l.split(/\s+/)[1] === name)?.split(/\s+/)[0];
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, lines, verdict };
}

const scratch = await mkdtemp(join(tmpdir(), "cridock-check-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));
const cni = await makeCniConfDir();
t.teardown(() => cni.cleanup());
const base = [...cridockTestFlags(cni), `--root-directory=${join(scratch, "root")}`, `--container-runtime-endpoint=unix://${join(scratch, "cri.sock")}`];

t.test("the test environment's configuration can serve pods", async (t) => {
  const r = check(...base);
  t.equal(r.status, 0, r.stdout + r.stderr);
  t.same(
    r.lines.slice(0, 13).map((l) => l.split(/\s+/)[1]),
    ["runtime", "docker", "cgroup", "cni", "root-directory", "capabilities", "oom-score-adj", "oci-layer", "mount-options", "checkpoint", "pause-image", "streaming", "socket"],
    "one line per item, in order",
  );
  for (const line of r.lines.slice(0, 13)) t.match(line, /^(OK|WARN) /, line);
  // This host's dockerd runs without --experimental (test/vm-lifecycle/checkpoint.test.ts turns it on in the node VM).
  t.match(r.stdout, /^(OK +checkpoint +CheckpointContainer, CheckpointPod and RestorePod are served|WARN +checkpoint +CheckpointContainer, CheckpointPod and RestorePod answer UNIMPLEMENTED: .* — fix: if you need checkpoints: )/m);
  // This host is cgroup v1, where the layer has nothing to carry; on cgroup v2 its absence warns (test/vm shows it OK).
  t.match(r.stdout, /^OK +oci-layer +(not registered, and not needed on cgroup v1|runtime "cridock")/m);
  // Bind mount options need the layer whatever the cgroup version: said either way, with the reason when not.
  t.match(r.stdout, /^(OK +mount-options +bind mount options \(noexec, nodev, nosuid\) are honoured|WARN +mount-options +bind mount options \(noexec, nodev, nosuid\) cannot be honoured: .* — fix: cridock oci-layer install$)/m);
  t.match(r.stdout, /^OK +docker +dockerd \S+ at unix:\/\/\/var\/run\/docker\.sock, Engine API 1\.\d+/m);
  t.match(r.stdout, /^(OK|WARN) +cgroup +driver (cgroupfs|systemd), cgroup v[12]/m);
  t.match(r.stdout, new RegExp(`^OK +cni +network ${cni.networkName} from ${cni.dir}`, "m"));
  t.match(r.stdout, /^OK +socket .* will be created with mode 0660/m);
  t.match(r.lines.at(-1)!, /cridock can serve pods/);
});

t.test("dockerd unreachable: docker, cgroup and pause-image fail", async (t) => {
  const r = check(...base, `--docker-endpoint=unix://${join(scratch, "no-docker.sock")}`);
  t.equal(r.status, 1);
  t.equal(r.verdict("docker"), "FAIL");
  t.match(r.stdout, /^FAIL docker .*does not answer at unix:\/\/.*no-docker\.sock.* — fix: start dockerd/m);
  t.equal(r.verdict("pause-image"), "FAIL");
  t.equal(r.verdict("cni"), "OK", "the rest is still judged");
  t.match(r.lines.at(-1)!, /could not serve pods/);
});

t.test("no CNI config, an unpullable pause image, a file where the socket goes, a foreign address", async (t) => {
  const emptyCni = await mkdtemp(join(scratch, "empty-cni-"));
  const notSocket = join(scratch, "not-a-socket");
  await writeFile(notSocket, "x");
  const r = check(
    ...base,
    `--cni-conf-dir=${emptyCni}`,
    `--pod-infra-container-image=${REGISTRY}/cridock-test/no-such-pause:0`,
    `--container-runtime-endpoint=unix://${notSocket}`,
    "--streaming-bind-addr=192.0.2.1:10010",
  );
  t.equal(r.status, 1, r.stdout);
  t.equal(r.verdict("docker"), "OK");
  t.match(r.stdout, new RegExp(`^FAIL cni +no usable network config in ${emptyCni}.* — fix: put a \\.conflist`, "m"));
  t.match(r.stdout, /^FAIL pause-image +\S+no-such-pause:0 is not present and cannot be pulled.* — fix: docker pull/m);
  t.match(r.stdout, /^FAIL socket +.*not-a-socket exists and is not a socket/m);
  t.match(r.stdout, /^FAIL streaming +cannot listen on 192\.0\.2\.1:10010/m);
});

t.test("capabilities: the check says what the engine under test does with privileged pods", async (t) => {
  const env = { ...process.env, DOCKER_HOST: TEST_DOCKER_ENDPOINT };
  // The oracle: the engine, asked directly (as the runtime's own privileged test does).
  const direct = spawnSync("docker", ["run", "--rm", "--privileged", "--network=none", "--entrypoint=true", BUSYBOX_IMAGE], { encoding: "utf8", timeout: 120_000, env });
  const engineCan = direct.status === 0;
  const r = check(...base, `--docker-endpoint=${TEST_DOCKER_ENDPOINT}`);
  const line = r.lines.find((l) => l.split(/\s+/)[1] === "capabilities") ?? "";
  t.comment(line);
  if (!/lacks/.test(line)) {
    t.match(line, /^OK +capabilities +all \d+ capabilities in the bounding set/);
  } else if (engineCan) {
    t.match(line, /^OK +capabilities +bounding set lacks .*: Docker \S+ started a privileged container .* privileged pods run with those/, "the engine runs privileged pods, and the check says so");
    t.notMatch(line, /refused/);
  } else {
    t.match(line, /^WARN capabilities +bounding set lacks .*, and Docker \S+ refused to start a privileged container .* privileged pods fail with FAILED_PRECONDITION/, direct.stderr);
  }
  const left = spawnSync("docker", ["ps", "-aq", "--filter", "label=io.cridock.check"], { encoding: "utf8", env });
  t.equal(left.stdout.trim(), "", "the check's privileged container is gone");
});

t.test("oom-score-adj says whether this host can lower scores, and fails when the flag forces what cannot work", async (t) => {
  // The check is a child of this process: it has the same bounding set, namespace and score.
  const facts = await readOomScoreFacts();
  const hostRestricted = !facts.sysResourceInBoundingSet || facts.inUserNamespace;
  const auto = check(...base);
  const forcedOff = check(...base, "--restrict-oom-score-adj=false");
  const forcedOn = check(...base, "--restrict-oom-score-adj=true");
  if (hostRestricted) {
    t.match(auto.stdout, new RegExp(`^WARN oom-score-adj +restricted \\(.*\\): scores below ${facts.ownScore} are raised to ${facts.ownScore}`, "m"));
    t.equal(forcedOff.status, 1, "Guaranteed pods could not start");
    t.match(forcedOff.stdout, /^FAIL oom-score-adj .*Permission denied.* — fix: drop --restrict-oom-score-adj=false/m);
  } else {
    t.match(auto.stdout, /^OK +oom-score-adj +scores are applied as kubelet asks/m);
    t.equal(forcedOff.verdict("oom-score-adj"), "OK");
  }
  t.match(forcedOn.stdout, new RegExp(`^(OK|WARN) +oom-score-adj +.*raised to ${facts.ownScore}`, "m"));
});

t.test("bad flags are refused like the server refuses them", async (t) => {
  const r = check("--network-plugin=weave");
  t.equal(r.status, 2);
  t.match(r.stderr, /invalid value for --network-plugin/);
});
