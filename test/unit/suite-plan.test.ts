/**
 * scripts/suite/plan.ts: the plan of a scripts/test.sh run — which suites run
 * on which engine setups and in what order, what the background build
 * prepares, and which test files a suite has on an engine. A wrong decision
 * here runs tests against the wrong engine, or silently none.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import {
  ALL_ENGINES,
  CONTAINERD_STORE_TESTS,
  ENGINE_INDEPENDENT_TESTS,
  PlanError,
  SUITES,
  VM_CHAIN,
  VM_NODES,
  VM_SUITES,
  besideSuites,
  chooseEngines,
  chooseSuites,
  findTestFiles,
  makePlan,
  mayLengthenRun,
  planLines,
  prebuildSteps,
  primaryOf,
  runOrder,
  suiteFiles,
  vmChainLines,
  vmReleases,
  vmStepDecision,
  type VmStep,
} from "../../scripts/suite/plan.ts";

const ALL = [...ALL_ENGINES];

// A repository of a few test files, as findTestFiles would list them.
const TREE = [
  "test/integration/images/pull.test.ts",
  "test/integration/images/remove.test.ts",
  "test/integration/stats/stats.test.ts",
  "test/integration/containers/create.test.ts",
  "test/integration/containers/engine-features.test.ts",
  "test/integration/containers/image-volumes.test.ts",
  "test/integration/containers/groups-devices.test.ts",
  "test/integration/service/install.test.ts",
  "test/integration/service/socket-activation.test.ts",
  "test/integration/oci/layer.test.ts",
  "test/integration/oci/mount-options.test.ts",
  "test/integration/service/unit.test.ts",
  "test/unit/b.test.ts",
  "test/unit/a.test.ts",
];
const find = (root: string) => TREE.filter((file) => file === root || file.startsWith(`${root}/`));

t.test("engines: all by default, those CRIDOCK_TEST_ENGINES names, an unknown one refused", async (t) => {
  t.same(chooseEngines(undefined), ALL);
  t.same(chooseEngines(""), ALL, "empty is unset");
  t.same(chooseEngines(" docker20.10\tdocker29 "), ["docker20.10", "docker29"]);
  t.throws(() => chooseEngines("docker29 docker28"), new PlanError(
    "unknown engine 'docker28' in CRIDOCK_TEST_ENGINES (docker29 docker29-containerd docker20.10)",
  ));
  t.throws(() => chooseEngines("  "), { message: "CRIDOCK_TEST_ENGINES names no engine" });
});

t.test("suites: all in the default order, an unknown one refused with the list", async (t) => {
  t.same(chooseSuites([]), [...SUITES]);
  t.equal(SUITES[0], "unit");
  t.same(SUITES.slice(-3), ["vm", "vm-lifecycle", "vm-kubeadm"], "the cgroup v2 node's suites last");
  t.same(chooseSuites(["e2e", "unit"]), ["e2e", "unit"], "in the order asked");
  t.throws(() => chooseSuites(["unit", "intgration"]), /^unknown suite 'intgration' \(unit, integration, .*vm-kubeadm\)$/);
});

t.test("the primary: docker29 when chosen, else the first engine", async (t) => {
  t.equal(primaryOf(["docker20.10", "docker29"]), "docker29");
  t.equal(primaryOf(["docker29-containerd", "docker20.10"]), "docker29-containerd");
});

t.test("engine order: those that need no build (Debian's 20.10) first, otherwise as chosen", async (t) => {
  t.same(runOrder(ALL), ["docker20.10", "docker29", "docker29-containerd"]);
  t.same(runOrder(["docker29-containerd", "docker29"]), ["docker29-containerd", "docker29"]);
});

t.test("runs: every suite on the primary, only integration and critest on the others", async (t) => {
  const plan = makePlan(["unit", "integration", "conformance", "e2e"], {});
  t.equal(plan.primary, "docker29");
  t.same(plan.runs.map(({ suite, engine }) => `${suite}@${engine}`), [
    "unit@docker29",
    "integration@docker20.10",
    "integration@docker29",
    "integration@docker29-containerd",
    "conformance@docker20.10",
    "conformance@docker29",
    "conformance@docker29-containerd",
    "e2e@docker29",
  ]);
  // Without docker29 the first chosen engine takes the once-only suites.
  const other = makePlan(["unit", "faults", "integration"], { CRIDOCK_TEST_ENGINES: "docker29-containerd docker20.10" });
  t.equal(other.primary, "docker29-containerd");
  t.same(other.runs.map(({ suite, engine }) => `${suite}@${engine}`), [
    "unit@docker29-containerd",
    "faults@docker29-containerd",
    "integration@docker20.10",
    "integration@docker29-containerd",
  ]);
  t.throws(() => makePlan(["unit"], { CRIDOCK_TEST_ENGINES: "podman" }), /unknown engine 'podman'/);
});

t.test("the VM suites run beside the others, unless they alone are asked for or CRIDOCK_VM_BESIDE is not 1", async (t) => {
  t.same(besideSuites([...SUITES], undefined), ["vm", "vm-lifecycle", "vm-kubeadm"]);
  t.same(besideSuites(["vm-kubeadm", "unit", "vm"], ""), ["vm", "vm-kubeadm"], "in the chain's order");
  t.same(besideSuites(["vm", "vm-lifecycle"], undefined), [], "alone: in the foreground");
  t.same(besideSuites(["unit"], undefined), []);
  t.same(besideSuites([...SUITES], "0"), []);
  t.same(makePlan([], { CRIDOCK_VM_BESIDE: "0" }).beside, []);
});

t.test("the background build: what the suites asked for need, in the order they need it", async (t) => {
  t.same(prebuildSteps(["unit"], ALL), [], "the unit tests need no tool");
  t.same(prebuildSteps(["integration"], ["docker20.10"]), ["cri-tools"], "Debian's engine needs only crictl");
  t.same(prebuildSteps(["integration"], ALL), ["cri-tools", "docker-engine"]);
  t.same(prebuildSteps(["unit", "unit"], ["docker20.10"]), ["cri-tools"], "more than the unit suite alone");
  t.same(prebuildSteps(["e2e"], ["docker20.10"]), ["cri-tools", "docker-engine", "kubernetes-previous"], "e2e's dockerd is Engine 29's, its kubelet the previous release's");
  t.same(prebuildSteps(["vm"], ["docker20.10"]), ["vm-image", "cri-tools", "kubernetes"]);
  t.same(prebuildSteps(["vm-kubeadm"], ["docker20.10"]), ["vm-image", "cri-tools", "kubernetes", "cluster-images"]);
  t.same(prebuildSteps([...SUITES], ALL), [
    "packages",
    "vm-image",
    "cri-tools",
    "docker-engine",
    "kubernetes",
    "kubernetes-previous",
    "cluster-images",
    "kubernetes-tests",
    "conformance-images",
  ]);
});

t.test("the plan's lines, as test.sh reads them", async (t) => {
  t.same(planLines(makePlan(["unit", "vm"], { CRIDOCK_TEST_ENGINES: "docker20.10" })), [
    "primary docker20.10",
    "beside vm",
    "prebuild vm-image cri-tools kubernetes",
    "run unit docker20.10",
    "run vm docker20.10",
  ]);
  t.same(planLines(makePlan(["unit"], {})).slice(0, 3), ["primary docker29", "beside", "prebuild"], "empty lists keep their line");
});

t.test("suite files: test/SUITE sorted; the containerd store gets only its listed files", async (t) => {
  t.same(suiteFiles("unit", "docker29", "docker29", find), ["test/unit/a.test.ts", "test/unit/b.test.ts"]);
  t.same(suiteFiles("integration", "docker29-containerd", "docker29", find), [
    "test/integration/containers/engine-features.test.ts",
    "test/integration/containers/groups-devices.test.ts",
    "test/integration/containers/image-volumes.test.ts",
    "test/integration/images/pull.test.ts",
    "test/integration/images/remove.test.ts",
    "test/integration/stats/stats.test.ts",
  ]);
  t.same(suiteFiles("faults", "docker29", "docker29", find), [], "no directory, no files");
});

t.test("suite files: the engine-independent tests run on the primary only", async (t) => {
  const onPrimary = suiteFiles("integration", "docker29", "docker29", find);
  for (const file of ENGINE_INDEPENDENT_TESTS) t.ok(onPrimary.includes(file), `${file} on the primary`);
  t.equal(onPrimary.length, TREE.length - 2);
  const on2010 = suiteFiles("integration", "docker20.10", "docker29", find);
  t.same(on2010, onPrimary.filter((file) => !ENGINE_INDEPENDENT_TESTS.includes(file)));
  t.ok(on2010.includes("test/integration/service/unit.test.ts"), "the rest of their directory stays");
  // When 20.10 is the primary (docker29 not chosen), they run there.
  t.same(suiteFiles("integration", "docker20.10", "docker20.10", find), onPrimary);
  // Only the integration suite leaves files out.
  t.same(suiteFiles("unit", "docker20.10", "docker29", find), ["test/unit/a.test.ts", "test/unit/b.test.ts"]);
});

t.test("suite files: an unknown suite or engine is refused", async (t) => {
  t.throws(() => suiteFiles("units", "docker29", "docker29", find), /^unknown suite 'units' \(unit, /);
  t.throws(() => suiteFiles("unit", "docker", "docker29", find), /^unknown engine 'docker' \(docker29, /);
  t.throws(() => suiteFiles("unit", "docker29", "", find), /^unknown primary engine '' /);
});

t.test("in this repository: the listed files exist, and the containerd store runs exactly them", async (t) => {
  const root = new URL("../..", import.meta.url).pathname;
  for (const path of [...CONTAINERD_STORE_TESTS, ...ENGINE_INDEPENDENT_TESTS]) {
    t.ok(existsSync(`${root}/${path}`), `${path} exists (a renamed file would drop out of the runs silently)`);
  }
  const realFind = (dir: string) => findTestFiles(root, dir);
  const containerd = suiteFiles("integration", "docker29-containerd", "docker29", realFind);
  t.ok(containerd.length >= CONTAINERD_STORE_TESTS.length);
  t.ok(containerd.every((file) => CONTAINERD_STORE_TESTS.some((p) => file === p || file.startsWith(`${p}/`))));
  const all = suiteFiles("integration", "docker29", "docker29", realFind);
  t.ok(all.length > containerd.length);
  t.ok(all.every((file) => file.startsWith("test/integration/") && file.endsWith(".test.ts")));
  t.ok(suiteFiles("unit", "docker29", "docker29", realFind).includes("test/unit/suite-plan.test.ts"));
  t.same(findTestFiles(root, "test/no-such-suite"), []);
});

/** plan.ts's command line, as test.sh runs it. */
const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  promisify(execFile)(process.execPath, ["--import=tsx", "scripts/suite/plan.ts", ...args], {
    env: { ...process.env, CRIDOCK_TEST_ENGINES: "", CRIDOCK_VM_BESIDE: "", ...env },
  });

t.test("the CLI: the plan and the files as lines, a refusal as one line and exit 1", async (t) => {
  const plan = await run(["plan", "unit", "integration"], { CRIDOCK_TEST_ENGINES: "docker20.10 docker29" });
  t.equal(plan.stdout, [
    "primary docker29",
    "beside",
    "prebuild cri-tools docker-engine",
    "run unit docker29",
    "run integration docker20.10",
    "run integration docker29",
    "",
  ].join("\n"));
  const files = await run(["files", "integration", "docker29-containerd", "docker29"]);
  t.ok(files.stdout.split("\n").includes("test/integration/containers/image-volumes.test.ts"));
  await t.rejects(run(["plan", "unit", "bogus"]), {
    code: 1,
    stderr: /^cridock-env: error: unknown suite 'bogus' \(unit, .*\)\n$/,
  });
  await t.rejects(run(["plan"], { CRIDOCK_TEST_ENGINES: "docker30" }), {
    code: 1,
    stderr: /^cridock-env: error: unknown engine 'docker30' in CRIDOCK_TEST_ENGINES/,
  });
  await t.rejects(run(["files", "unit"]), { code: 1, stderr: /usage: tsx scripts\/suite\/plan\.ts/ });
});

t.test("VM chain: the asked suites' steps in the chain's order, every file where none are named; a file not in the suite refused", async (t) => {
  const find = (root: string) => (root === "test/vm" ? ["test/vm/b.test.ts", "test/vm/a.test.ts"] : root === "test/vm-kubeadm" ? ["test/vm-kubeadm/k.test.ts"] : []);
  const chain: VmStep[] = [
    { suite: "vm", node: "debian13", estimateS: 100 },
    { suite: "vm-kubeadm", node: "debian13-docker29-containerd", estimateS: 50, onlyHere: "kubeadm" },
    { suite: "vm", node: "debian12", files: ["test/vm/b.test.ts"], estimateS: 70 },
  ];
  t.same(vmChainLines(["vm-kubeadm", "vm"], chain, find), [
    "vm debian13 trixie distro debian13 100 0 - test/vm/a.test.ts test/vm/b.test.ts",
    "vm-kubeadm debian13-docker29-containerd trixie docker29-containerd debian13-docker29-containerd 50 1 - test/vm-kubeadm/k.test.ts",
    "vm debian12 bookworm distro debian12 70 0 - test/vm/b.test.ts",
  ]);
  t.same(vmChainLines(["vm"], chain, find), ["vm debian13 trixie distro debian13 100 0 - test/vm/a.test.ts test/vm/b.test.ts", "vm debian12 bookworm distro debian12 70 0 - test/vm/b.test.ts"]);
  t.same(vmReleases(chain), ["trixie", "bookworm"]);
  t.throws(() => vmChainLines(["vm"], [{ suite: "vm", node: "debian13", files: ["test/vm/gone.test.ts"], estimateS: 1 }], find), {
    message: /VM node debian13 names test\/vm\/gone\.test\.ts, which is not a test file of test\/vm/,
  });
  t.throws(() => vmChainLines(["unit"], chain, find), { message: /'unit' is not a VM suite/ });
});

t.test("VM chain: an in-place step runs on the VM of the vm step before it, on the same Debian release, or is refused", async (t) => {
  const find = (root: string) => (root === "test/vm" ? ["test/vm/a.test.ts"] : root === "test/vm-lifecycle" ? ["test/vm-lifecycle/r.test.ts"] : []);
  const chain: VmStep[] = [
    { suite: "vm", node: "debian13", estimateS: 100 },
    { suite: "vm", node: "debian13-docker29", inPlace: true, estimateS: 30 },
    { suite: "vm", node: "debian13-docker29-containerd", inPlace: true, estimateS: 40 },
    { suite: "vm-lifecycle", node: "debian13-docker29", estimateS: 60 },
  ];
  t.same(vmChainLines(["vm", "vm-lifecycle"], chain, find), [
    "vm debian13 trixie distro debian13 100 0 - test/vm/a.test.ts",
    "vm debian13-docker29 trixie docker29 debian13 30 1 - test/vm/a.test.ts",
    "vm debian13-docker29-containerd trixie docker29-containerd debian13 40 1 - test/vm/a.test.ts",
    "vm-lifecycle debian13-docker29 trixie docker29 debian13-docker29 60 0 - test/vm-lifecycle/r.test.ts",
  ]);
  const refused = /runs in place, which only a vm step after a vm step on Debian trixie can/;
  t.throws(() => vmChainLines(["vm"], [chain[1]!], find), { message: refused }, "no step before it");
  t.throws(() => vmChainLines(["vm", "vm-lifecycle"], [chain[0]!, chain[3]!, chain[1]!], find), { message: refused }, "a VM of its own in between");
  t.throws(() => vmChainLines(["vm"], [{ suite: "vm", node: "debian12", estimateS: 1 }, chain[1]!], find), { message: refused }, "another Debian release");
  t.throws(() => vmChainLines(["vm-lifecycle", "vm"], [chain[0]!, { ...chain[3]!, inPlace: true }], find), { message: /vm-lifecycle@debian13-docker29 runs in place/ });
});

t.test("VM chain: a step hands the package's upgrade cycle to a later in-place step on its VM, both running the pods file, or is refused", async (t) => {
  const find = (root: string) => (root === "test/vm" ? ["test/vm/pods.test.ts", "test/vm/v.test.ts"] : root === "test/vm-kubeadm" ? ["test/vm-kubeadm/k.test.ts"] : []);
  const first: VmStep = { suite: "vm", node: "debian13", packageCycleIn: "debian13-docker29-containerd", estimateS: 100 };
  const classic: VmStep = { suite: "vm", node: "debian13-docker29", files: ["test/vm/v.test.ts"], inPlace: true, estimateS: 30 };
  const store: VmStep = { suite: "vm", node: "debian13-docker29-containerd", files: ["test/vm/pods.test.ts"], inPlace: true, estimateS: 40 };
  t.same(vmChainLines(["vm"], [first, classic, store], find), [
    "vm debian13 trixie distro debian13 100 0 vm@debian13-docker29-containerd test/vm/pods.test.ts test/vm/v.test.ts",
    "vm debian13-docker29 trixie docker29 debian13 30 1 - test/vm/v.test.ts",
    "vm debian13-docker29-containerd trixie docker29-containerd debian13 40 1 - test/vm/pods.test.ts",
  ]);
  const refused = /vm@debian13 hands the package's upgrade cycle to debian13-docker29-containerd, which must be a later in-place step on its VM, both running test\/vm\/pods\.test\.ts/;
  t.throws(() => vmChainLines(["vm"], [first, classic], find), { message: refused }, "no such step");
  t.throws(() => vmChainLines(["vm"], [first, { ...store, files: ["test/vm/v.test.ts"] }], find), { message: refused }, "the taker runs no pods file");
  t.throws(() => vmChainLines(["vm"], [{ ...first, files: ["test/vm/v.test.ts"] }, store], find), { message: refused }, "the giver runs no pods file");
  t.throws(() => vmChainLines(["vm", "vm-kubeadm"], [first, { suite: "vm-kubeadm", node: "debian13-docker29-containerd", estimateS: 1 }], find), { message: refused }, "not in place");
  t.throws(() => vmChainLines(["vm"], [first, { suite: "vm", node: "debian13-docker29-containerd", estimateS: 1 }], find), { message: refused }, "a VM of its own");
});

t.test("VM chain: a step starts when it is expected to end within the budget at the machine's pace; once the host's suites end, only a step the run may wait for", async (t) => {
  const clock = { ageS: 3000, first: { estimateS: 1000, tookS: 1000 }, hostEnded: false, budgetS: 4500 };
  const own = (estimateS: number) => ({ estimateS, mayLengthenRun: false });
  const waitedFor = (estimateS: number) => ({ estimateS, mayLengthenRun: true });
  t.same(vmStepDecision(own(500), clock), { start: true, expectedEndS: 3500 });
  t.same(vmStepDecision(own(1500), clock), { start: true, expectedEndS: 4500 }, "ending at the budget itself");
  const late = vmStepDecision(waitedFor(1501), clock);
  t.match(late, { start: false, reason: /at 3000 s into the run, taking 1501 s \(1\.00x its estimate.*past CRIDOCK_VM_BUDGET_S \(4500 s\)/ });
  // A machine half as fast as the estimates: each step is expected to take twice its estimate.
  const slow = { ...clock, first: { estimateS: 1000, tookS: 2000 } };
  t.same(vmStepDecision(waitedFor(700), slow), { start: true, expectedEndS: 4400 });
  t.match(vmStepDecision(waitedFor(800), slow), { start: false, reason: /taking 1600 s \(2\.00x/ });
  // A first step faster than its estimate, or one that failed at once, does not make the machine count as fast.
  t.same(vmStepDecision(own(1500), { ...clock, first: { estimateS: 1000, tookS: 10 } }), { start: true, expectedEndS: 4500 });
  // Once the host's suites have ended, only the steps the run may wait for start, and still within the budget.
  const waiting = { ...clock, hostEnded: true };
  t.same(vmStepDecision(waitedFor(500), waiting), { start: true, expectedEndS: 3500 });
  t.match(vmStepDecision(waitedFor(1501), waiting), { start: false, reason: /past CRIDOCK_VM_BUDGET_S/ });
  t.match(vmStepDecision(own(500), waiting), { start: false, reason: /the host's suites had ended at 3000 s into the run, and a node of its own \(500 s.*what the host's suites cover/ });
});

t.test("VM chain: the run may wait for an in-place step, or one whose files only the cgroup v2 node can test, not for others", async (t) => {
  t.equal(mayLengthenRun({ inPlace: true }), true);
  t.equal(mayLengthenRun({ onlyHere: "reboots" }), true);
  t.equal(mayLengthenRun({}), false);
  t.equal(mayLengthenRun({ inPlace: false }), false);
  const lengthens = Object.fromEntries(VM_CHAIN.map((step) => [`${step.suite}@${step.node}`, mayLengthenRun(step)]));
  t.same(
    lengthens,
    {
      "vm@debian13": false,
      "vm@debian13-docker29": true,
      "vm@debian13-docker29-containerd": true,
      "vm-lifecycle@debian13-docker29": true,
      "vm-kubeadm@debian12": true,
      "vm@debian12": false,
    },
    "reboots, checkpoints and kubeadm's systemd driver are the cgroup v2 node's alone; Debian 12's 20.10 the host's suites cover",
  );
});

t.test("VM chain's step decision from the command line: start or skip with the reason; bad numbers refused", async (t) => {
  t.equal((await run(["vm-step", "500", "1", "3000", "1000", "1000", "1", "4500"])).stdout, "start 3500\n");
  t.match((await run(["vm-step", "500", "0", "3000", "1000", "1000", "1", "4500"])).stdout, /^skip not started: the host's suites had ended/);
  await t.rejects(run(["vm-step", "500", "x", "3000", "1000", "1000", "1", "4500"]), { code: 1, stderr: /vm-step takes 7 whole numbers/ });
  await t.rejects(run(["vm-step", "500"]), { code: 1, stderr: /usage: tsx scripts\/suite\/plan\.ts/ });
});

t.test("in this repository: the chain's files exist; Debian 13 with every vm file first, then Engine 29's two stores in place; both Debian releases in it", async (t) => {
  const root = new URL("../..", import.meta.url).pathname;
  const lines = vmChainLines([...VM_SUITES], VM_CHAIN, (dir) => findTestFiles(root, dir));
  t.equal(lines.length, VM_CHAIN.length);
  t.ok(lines.every((line) => line.split(" ").length > 8), "every step runs a file");
  for (const suite of VM_SUITES) t.ok(VM_CHAIN.some((step) => step.suite === suite), `${suite} has a step`);
  t.match(VM_CHAIN[0], { suite: "vm", node: "debian13" });
  t.equal(VM_CHAIN[0]!.files, undefined, "the first node runs every vm file");
  t.same(
    VM_CHAIN.filter((step) => step.inPlace).map(({ node }) => VM_NODES[node].engine),
    ["docker29", "docker29-containerd"],
    "Engine 29's stores on the first node's VM, right after it",
  );
  t.ok(VM_CHAIN[1]!.inPlace && VM_CHAIN[2]!.inPlace);
  t.match(lines[0], /^vm debian13 trixie distro debian13 \d+ 0 vm@debian13-docker29-containerd /, "the first node hands the upgrade cycle to Engine 29's containerd store");
  t.ok(VM_CHAIN.every(({ estimateS }) => Number.isInteger(estimateS) && estimateS > 0), "every step has an estimate");
  const setups = new Set(VM_CHAIN.map(({ node }) => `${VM_NODES[node].debian}/${VM_NODES[node].engine}`));
  t.same([...setups].sort(), ["bookworm/distro", "trixie/distro", "trixie/docker29", "trixie/docker29-containerd"]);
  t.same(vmReleases(), ["trixie", "bookworm"], "both images, the first step's first");
  for (const node of Object.keys(VM_NODES)) t.match(node, /^[a-z0-9][a-z0-9-]{0,31}$/, "a VM name vm/node.sh accepts");
});
