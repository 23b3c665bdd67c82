/**
 * critest (the CRI validation suite) on the cgroup v2 node (docs/testing.md,
 * "The cgroup v2 node"): critest in the guest against the cridock its .deb installed there,
 * on the node's engine (Debian 13's docker.io 26.1, then Engine 29 switched
 * in on the same VM: scripts/suite/plan.ts's VM_CHAIN) with the systemd cgroup driver, with the bounded
 * focus of validation-focus.txt beside this file (the guest's CPU is emulated:
 * about 20 s a spec).
 *
 * critest pulls its images by their upstream names; the guest reaches the
 * host's mirror registry for them (trustHostMirror), as the host's engines
 * do. critest loads its AppArmor profiles with `sudo apparmor_parser`; the
 * guest's shell is root's and has no sudo, so a one-line sudo that runs its
 * arguments stands in.
 *
 * The file sorts after package.test.ts, whose purge and install it then
 * finds done on the suite's shared node.
 *
 * Every spec of the focus must run and pass, and each focus line must match
 * at least one spec that passed (a line that stopped matching would
 * otherwise pass by running nothing). The one exception is the user
 * namespace line on a node whose default handler reports no
 * user_namespaces (Debian 12's): critest skips those specs there, as
 * kubelet refuses such pods.
 */
import t from "tap";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CRICTL, CRITEST } from "../helpers/env.ts";
import { ensureDebInstalled, nodeHasUserns, suiteDeb, suiteNode, shellQuote, trustHostMirror } from "../helpers/vm-node.ts";
import { countJunit, passedSpecs } from "../conformance/junit.ts";
import { ginkgoFlags, parseFocus, type SpecPattern } from "../conformance/spec-lists.ts";

const FOCUS_FILE = fileURLToPath(new URL("validation-focus.txt", import.meta.url));
const JUNIT = "/root/critest-junit.xml";
/** critest's own bound: well above the focus's 5-6 minutes under TCG. */
const CRITEST_TIMEOUT_S = 1500;

/** Focus lines of specs critest runs only where the default handler reports user namespaces. */
const USERNS_LINE = /UserNamespaces/;
/**
 * Specs cridock fails on purpose. critest's pod in its own user namespace
 * maps host ids 1000-100999, the host's own users' (a person's uid on most
 * hosts): cridock refuses every mapping onto host ids 0-65535
 * (oci/id-mappings.ts), which kubelet never sends. The other
 * UserNamespaces specs still run, and docs/operating.md says so.
 */
const SKIP: SpecPattern[] = [
  { regex: "UserNamespaces .*runtime should support NamespaceMode_POD", source: "validation.test.ts", reason: "maps host ids 1000-100999, which cridock refuses" },
];

const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;

if (!existsSync(CRITEST)) {
  t.plan(0, `${CRITEST} is missing: scripts/env/install-cri-tools.sh builds it`);
} else {
  const focus = parseFocus(await readFile(FOCUS_FILE, "utf8"), "validation-focus.txt");
  const [booted, built] = await Promise.allSettled([suiteNode(t, "validation"), suiteDeb()]);
  if (booted.status === "rejected") throw booted.reason;
  const vm = booted.value;
  if (built.status === "rejected") throw built.reason;

  t.test("critest's focused specs pass on the node", async (t) => {
    await ensureDebInstalled(vm, built.value);
    await trustHostMirror(vm);
    await vm.copy(CRITEST, "/usr/local/bin/critest");
    await vm.run(`command -v sudo >/dev/null || { printf '#!/bin/sh\\nexec "$@"\\n' >/usr/local/bin/sudo && chmod 0755 /usr/local/bin/sudo; }`);
    const args = ["-runtime-endpoint=unix:///var/run/cridock.sock", `-ginkgo.junit-report=${JUNIT}`, "-ginkgo.no-color", ...ginkgoFlags(focus, SKIP)];
    const since = Date.now();
    const run = await vm.ssh(`rm -f ${JUNIT}; cd /root && timeout ${CRITEST_TIMEOUT_S} critest ${args.map(shellQuote).join(" ")}`, {
      timeoutMs: (CRITEST_TIMEOUT_S + 120) * 1000,
    });
    t.comment(`critest ran ${seconds(since)} (exit ${run.status})`);
    const xml = (await vm.ssh(`cat ${JUNIT}`)).stdout;
    const counts = countJunit(xml);
    const passed = passedSpecs(xml);
    t.comment(`${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} not run`);
    t.equal(run.status, 0, `critest exits 0${run.status === 0 ? "" : `:\n${(run.stdout + run.stderr).slice(-4000)}`}`);
    t.same(counts.failures, [], "no spec failed");
    await vm.copy(CRICTL, "/usr/local/bin/crictl");
    const userns = await nodeHasUserns(vm);
    for (const line of focus) {
      const re = new RegExp(line.regex);
      if (!userns && USERNS_LINE.test(line.regex)) {
        t.comment(`${line.source}: not run, the node reports no user namespaces`);
        continue;
      }
      t.ok(passed.some((name) => re.test(name)), `${line.source} (${line.regex}) matched a spec that passed`);
    }
    const left = (await vm.run("docker ps -aq --filter label=io.kubernetes.docker.type=podsandbox")).trim();
    t.equal(left, "", "critest left no pod sandbox behind");
  });
}
