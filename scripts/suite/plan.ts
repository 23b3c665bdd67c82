/**
 * The plan of a scripts/test.sh run: which suites exist and in what order
 * they run, which engine setups run which suite, the order of the engines,
 * which VM suites run beside the others, what the background build
 * (scripts/env/prebuild-tools.sh) prepares for them, and which test files a
 * tap suite has on an engine. These are pure decisions: they live here, with
 * unit tests (test/unit/suite-plan.test.ts), and scripts/test.sh asks this
 * CLI for them once node_modules is in place.
 *
 *   plan [SUITE...]             the run's plan (all suites when none is named),
 *                               one fact a line, for test.sh to read:
 *                                 primary ENGINE     the engine the once-only suites run on
 *                                 beside [SUITE...]  the VM suites run beside the others
 *                                 prebuild [STEP...] prebuild-tools.sh's steps
 *                                 run SUITE ENGINE   one a suite run, in the run's order
 *                               It reads CRIDOCK_TEST_ENGINES and CRIDOCK_VM_BESIDE.
 *   files SUITE ENGINE PRIMARY  the test files of SUITE's directory (test/SUITE)
 *                               on ENGINE, one a line, relative to the repository
 *   vm-chain VM-SUITE...        the VM chain's steps of these suites (vmChainLines)
 *   vm-releases                 the Debian releases the chain boots
 *   vm-step ESTIMATE LENGTHENS AGE FIRST-ESTIMATE FIRST-TOOK HOST-ENDED BUDGET
 *                               whether a step after the chain's first starts
 *                               (vmStepDecision; LENGTHENS is its chain line's
 *                               column): `start EXPECTED-END` or `skip REASON`
 *
 * An unknown engine or suite is refused: one line on stderr, exit 1.
 *
 * Usage: tsx scripts/suite/plan.ts plan [SUITE...] | files SUITE ENGINE PRIMARY | vm-chain ... | vm-releases | vm-step ...
 */
import { lstatSync, readdirSync } from "node:fs";
import { join, posix, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * The engine setups the suites run against (tests pick the engine from
 * CRIDOCK_TEST_DOCKER_ENDPOINT):
 *   docker29            Docker Engine 29, classic image store: the primary, every suite;
 *   docker29-containerd Engine 29 with the containerd image store: the integration
 *                       tests of images, stats and mounts, and critest;
 *   docker20.10         Debian's 20.10 on /var/run/docker.sock, the oldest supported:
 *                       the integration tests and critest.
 */
export const ALL_ENGINES = ["docker29", "docker29-containerd", "docker20.10"] as const;
export const PRIMARY_ENGINE = "docker29";

/** Every suite, in the order a run without arguments runs them. */
export const SUITES = [
  "unit",
  "integration",
  "packaging",
  "faults",
  "deno",
  "conformance",
  "e2e",
  "cluster",
  "node-conformance",
  "vm",
  "vm-lifecycle",
  "vm-kubeadm",
] as const;

/** The suites on the cgroup v2 node, in the order they run beside the others. */
export const VM_SUITES = ["vm", "vm-lifecycle", "vm-kubeadm"] as const;

/**
 * A cgroup v2 node: a Debian release under qemu (scripts/vm/node.sh,
 * CRIDOCK_VM_DEBIAN) with a Docker engine (scripts/vm/engine.sh,
 * CRIDOCK_VM_ENGINE).
 */
export interface VmNodeSetup {
  debian: "trixie" | "bookworm";
  engine: "distro" | "docker29" | "docker29-containerd";
}

export const VM_NODES = {
  // Debian 13 with its docker.io 26.1 (containerd 1.7, runc 1.1): the node of 2026.
  debian13: { debian: "trixie", engine: "distro" },
  // Debian 12 with its docker.io 20.10: the oldest engine supported.
  debian12: { debian: "bookworm", engine: "distro" },
  // Docker CE 29 as an engine upgraded in place keeps it (the classic store), runc 1.5.
  "debian13-docker29": { debian: "trixie", engine: "docker29" },
  // Docker CE 29 as a fresh install has it (the containerd image store).
  "debian13-docker29-containerd": { debian: "trixie", engine: "docker29-containerd" },
} as const satisfies Record<string, VmNodeSetup>;
export type VmNodeName = keyof typeof VM_NODES;

/** One step of the VM chain: a suite on a node. */
export interface VmStep {
  suite: (typeof VM_SUITES)[number];
  node: VmNodeName;
  /** The suite's files there; all of test/SUITE when none are named. */
  files?: readonly string[];
  /**
   * Runs on the VM the step before it booted, its engine switched in place
   * (`vm/node.sh engine`, as an operator replaces Docker under running
   * cridock): no boot, no install. Only a vm step, after a vm step of the
   * same Debian release.
   */
  inPlace?: boolean;
  /**
   * The in-place step of this VM, later in the chain, that runs the
   * package's upgrade cycle (pods.test.ts: upgrade, downgrade, purge and
   * reinstall with pods running) in this step's stead. The cycle does not
   * depend on the engine; it is the costliest part of the pods file under
   * load (three installs of the .deb), so it goes where the guest is least
   * starved, when the host's suites are ending, and is skipped with that
   * step when the budget says so (vmStepDecision). The bind mount options
   * pod on the node without the layer (the layer uninstalled, cridock and
   * kubelet restarted) goes with it: kubelet's and cridock's, whatever the
   * engine.
   */
  packageCycleIn?: VmNodeName;
  /**
   * Seconds the step takes on an unloaded 2-core machine beside the host's
   * suites (fresh-machine CI runs of 2026-12-02 and 12-03): what the chain
   * expects of it, scaled by how slow the first step was (vmStepDecision).
   */
  estimateS: number;
  /**
   * What in the step's files only the cgroup v2 node can test: nothing on
   * the cgroup v1 host covers it. Such a step, booting a VM of its own,
   * still starts once the host's suites have ended, when it fits the
   * budget (vmStepDecision): where CI's time means choosing, the run keeps
   * what only this node can run, and drops what the host already covers.
   */
  onlyHere?: string;
}

/** Whether the run may wait for this step once the host's suites have ended (vmStepDecision). */
export function mayLengthenRun(step: Pick<VmStep, "inPlace" | "onlyHere">): boolean {
  return step.inPlace === true || step.onlyHere !== undefined;
}

/**
 * The VM suites' steps, in the order they run. The first step boots
 * Debian 13 with its own docker.io 26.1 and runs every vm file; on that
 * same VM the engine is then switched in place to Engine 29, each image
 * store in turn, for the files that differ by engine: critest's node set
 * on the classic store, kubelet's pods (unified values, resize, restarts,
 * OOM, user namespaces) on the containerd store. So the engines of 2026
 * are all on cgroup v2 with the systemd driver for one boot, and no file
 * runs on each (CI's time: the guest's CPU is emulated). Then, each with
 * VMs of its own:
 * - vm-lifecycle (reboots, CheckpointContainer through CRIU), which only a
 *   VM can test: Engine 29 with the classic store and runc 1.5;
 * - vm-kubeadm (a cluster's control plane, resize, swap) on Debian 12's
 *   20.10: on Debian 13 with Engine 29's containerd store kubeadm's API
 *   server answered only "TLS handshake timeout" until kubeadm's wait ran
 *   out, its guest's load at 13 beside one more VM (docs/testing.md);
 * - vm on Debian 12, the oldest engine supported: the package's install
 *   and kubelet's pods.
 * In CI's background chain each step after the first starts only when
 * vmStepDecision says it fits, so the order is what matters most first.
 * Any node runs any file: CRIDOCK_VM_DEBIAN and CRIDOCK_VM_ENGINE pick one
 * for a file run alone (docs/testing.md, "The cgroup v2 node").
 */
export const VM_CHAIN: readonly VmStep[] = [
  { suite: "vm", node: "debian13", packageCycleIn: "debian13-docker29-containerd", estimateS: 1525 },
  { suite: "vm", node: "debian13-docker29", files: ["test/vm/validation.test.ts"], inPlace: true, estimateS: 260 },
  { suite: "vm", node: "debian13-docker29-containerd", files: ["test/vm/pods.test.ts"], inPlace: true, estimateS: 725 },
  {
    suite: "vm-lifecycle",
    node: "debian13-docker29",
    estimateS: 1450,
    onlyHere: "a node's reboots, and CheckpointContainer and CheckpointPod through CRIU, which fails on the host's kernel",
  },
  {
    suite: "vm-kubeadm",
    node: "debian12",
    estimateS: 500,
    onlyHere: "kubeadm's default systemd cgroup driver, and LimitedSwap, which kubelet allows on cgroup v2 alone",
  },
  { suite: "vm", node: "debian12", files: ["test/vm/package.test.ts", "test/vm/pods.test.ts"], estimateS: 875 },
];

/**
 * The integration tests the containerd image store adds something to: images, stats, mounts,
 * image volumes, and what reads image files (the Strict policy's /etc/passwd).
 */
export const CONTAINERD_STORE_TESTS = [
  "test/integration/images",
  "test/integration/stats",
  "test/integration/containers/engine-features.test.ts",
  "test/integration/containers/image-volumes.test.ts",
  "test/integration/containers/groups-devices.test.ts",
];

/**
 * Integration tests whose subject is not the engine (the npm package's
 * install, systemd socket activation, the OCI layer on a dockerd of its
 * own): they run with the primary only.
 */
export const ENGINE_INDEPENDENT_TESTS = [
  "test/integration/service/install.test.ts",
  "test/integration/service/socket-activation.test.ts",
  // Its own dockerd (Debian's), never the engine under test.
  "test/integration/oci/layer.test.ts",
  // Its own dockerd running the primary engine's binary, with the layer installed in it.
  "test/integration/oci/mount-options.test.ts",
];

/** A refusal of the arguments or the environment, reported as one line. */
export class PlanError extends Error {}

function isEngine(name: string): boolean {
  return (ALL_ENGINES as readonly string[]).includes(name);
}

function isSuite(name: string): boolean {
  return (SUITES as readonly string[]).includes(name);
}

/**
 * The engines CRIDOCK_TEST_ENGINES names (space-separated), all of them
 * when it is unset or empty; an unknown name or none at all is refused.
 */
export function chooseEngines(wanted: string | undefined): string[] {
  const names = (wanted || ALL_ENGINES.join(" ")).split(/[ \t\n]+/).filter((name) => name !== "");
  for (const name of names) {
    if (!isEngine(name)) {
      throw new PlanError(`unknown engine '${name}' in CRIDOCK_TEST_ENGINES (${ALL_ENGINES.join(" ")})`);
    }
  }
  if (names.length === 0) throw new PlanError("CRIDOCK_TEST_ENGINES names no engine");
  return names;
}

/** The suites asked for, all of them when none is; an unknown name is refused. */
export function chooseSuites(asked: string[]): string[] {
  for (const suite of asked) {
    if (!isSuite(suite)) throw new PlanError(`unknown suite '${suite}' (${SUITES.join(", ")})`);
  }
  return asked.length > 0 ? asked : [...SUITES];
}

/** The engine the once-only suites (unit, fault, kubelet, Deno, ...) run on: the primary, or the first chosen. */
export function primaryOf(engines: string[]): string {
  return engines.includes(PRIMARY_ENGINE) ? PRIMARY_ENGINE : engines[0]!;
}

/**
 * The chosen engines in the order the suites run on them: those that need
 * no build first (Debian's 20.10), so that a fresh machine's Engine 29
 * build overlaps a whole suite run.
 */
export function runOrder(engines: string[]): string[] {
  const built = (engine: string) => engine.startsWith("docker29");
  return [...engines.filter((engine) => !built(engine)), ...engines.filter(built)];
}

/** Which suites run on which engine setup (besides the primary, which runs every suite). */
export function engineRuns(engine: string, suite: string): boolean {
  return engine === PRIMARY_ENGINE || suite === "integration" || suite === "conformance";
}

/**
 * The VM suites that run beside the host's suites from the start of the run
 * (those of them asked for): none when CRIDOCK_VM_BESIDE is not 1, or when
 * only VM suites are asked for (they run in the foreground then: nothing
 * else runs beside them).
 */
export function besideSuites(suites: string[], vmBeside: string | undefined): string[] {
  // Unset or empty is the default, 1.
  if ((vmBeside || "1") !== "1") return [];
  const beside = VM_SUITES.filter((suite) => suites.includes(suite));
  return beside.length === suites.length ? [] : beside;
}

/**
 * What scripts/env/prebuild-tools.sh builds for these suites on these
 * engines, in the order the suites will want it.
 */
export function prebuildSteps(suites: string[], engines: string[]): string[] {
  const has = (...names: string[]) => names.some((name) => suites.includes(name));
  const onlyUnit = suites.length === 1 && suites[0] === "unit";
  const tests = has("cluster", "node-conformance");
  const engine29 = has("e2e", "cluster", "node-conformance") || (engines.some((e) => e.startsWith("docker29")) && !onlyUnit);
  const steps: string[] = [];
  if (tests) steps.push("packages");
  // Beside the others from the start (prebuild-tools.sh): mostly downloads.
  if (has(...VM_SUITES)) steps.push("vm-image");
  if (!onlyUnit) steps.push("cri-tools");
  if (engine29) steps.push("docker-engine");
  if (has("cluster", ...VM_SUITES) || tests) steps.push("kubernetes");
  // The kubelet suite (test/e2e) is the lane that runs the previous release.
  if (has("e2e")) steps.push("kubernetes-previous");
  if (has("cluster", "vm-kubeadm")) steps.push("cluster-images");
  if (tests) steps.push("kubernetes-tests", "conformance-images");
  return steps;
}

export interface Plan {
  engines: string[];
  primary: string;
  /** The engines in the order the suites run on them. */
  order: string[];
  beside: string[];
  prebuild: string[];
  /** Each suite run, in order: every suite on the primary, some on the other engines too. */
  runs: Array<{ suite: string; engine: string }>;
}

/** The plan of a run of these suites (all when none), with test.sh's environment. */
export function makePlan(asked: string[], env: NodeJS.ProcessEnv): Plan {
  const engines = chooseEngines(env.CRIDOCK_TEST_ENGINES);
  const suites = chooseSuites(asked);
  const primary = primaryOf(engines);
  const order = runOrder(engines);
  const runs: Plan["runs"] = [];
  for (const suite of suites) {
    for (const engine of order) {
      if (engine === primary || engineRuns(engine, suite)) runs.push({ suite, engine });
    }
  }
  return {
    engines,
    primary,
    order,
    beside: besideSuites(suites, env.CRIDOCK_VM_BESIDE),
    prebuild: prebuildSteps(suites, engines),
    runs,
  };
}

/** The plan as the lines test.sh reads (see the usage above). */
export function planLines(plan: Plan): string[] {
  return [
    `primary ${plan.primary}`,
    ["beside", ...plan.beside].join(" "),
    ["prebuild", ...plan.prebuild].join(" "),
    ...plan.runs.map(({ suite, engine }) => `run ${suite} ${engine}`),
  ];
}

/**
 * Where a suite's test files are on an engine: test/SUITE, or on the
 * containerd image store the integration tests it adds something to; and
 * the files to leave out: the engine-independent ones on all but the primary.
 */
export function suiteSources(suite: string, engine: string, primary: string): { roots: string[]; skip: string[] } {
  for (const [what, name] of [["suite", suite], ["engine", engine], ["primary engine", primary]] as const) {
    const known = what === "suite" ? isSuite(name) : isEngine(name);
    if (!known) throw new PlanError(`unknown ${what} '${name}' (${(what === "suite" ? SUITES : ALL_ENGINES).join(", ")})`);
  }
  const integration = suite === "integration";
  return {
    roots: integration && engine === "docker29-containerd" ? CONTAINERD_STORE_TESTS : [`test/${suite}`],
    skip: integration && engine !== primary ? ENGINE_INDEPENDENT_TESTS : [],
  };
}

/**
 * suiteFiles SUITE ENGINE PRIMARY: the test files of a suite on an engine,
 * sorted (by code point, as `sort` under test.sh's C.UTF-8 does), so runs are
 * repeatable. find(root) gives the test files under root (root itself when it
 * is one; nothing when it does not exist).
 */
export function suiteFiles(suite: string, engine: string, primary: string, find: (root: string) => string[]): string[] {
  const { roots, skip } = suiteSources(suite, engine, primary);
  return roots
    .flatMap(find)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .filter((file) => !skip.includes(file));
}

/** The vm file whose package upgrade cycle a step may hand on (VmStep.packageCycleIn). */
const PACKAGE_CYCLE_FILE = "test/vm/pods.test.ts";

/**
 * The VM chain's steps of these suites as the lines scripts/suite/vm.sh
 * reads, one a step: `SUITE NODE DEBIAN ENGINE VM ESTIMATE LENGTHENS CYCLE
 * FILE...`, where VM names the VM the step runs on: its own node's, or for
 * an in-place step the node's of the step that booted it; LENGTHENS is 1
 * when the run may wait for the step (mayLengthenRun), else 0; CYCLE is `-`,
 * or the step (`vm@NODE`) that runs the package's upgrade cycle in its
 * stead. A file a step names must be one of its suite's, so that a renamed
 * file cannot quietly drop out of a run. An in-place step must follow,
 * among the steps asked for, a vm step on the same Debian release, whose
 * VM it takes over. A step that hands its upgrade cycle on runs the pods
 * file, and so does the later in-place step on its VM that takes it.
 */
export function vmChainLines(suites: string[], chain: readonly VmStep[], find: (root: string) => string[]): string[] {
  for (const suite of suites) {
    if (!(VM_SUITES as readonly string[]).includes(suite)) throw new PlanError(`'${suite}' is not a VM suite (${VM_SUITES.join(", ")})`);
  }
  const steps = chain.filter(({ suite }) => suites.includes(suite));
  let vm: { name: string; debian: string } | undefined;
  const placed = steps.map(({ suite, node, files, inPlace }) => {
    const all = find(`test/${suite}`).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (const file of files ?? []) {
      if (!all.includes(file)) throw new PlanError(`VM node ${node} names ${file}, which is not a test file of test/${suite}`);
    }
    const { debian } = VM_NODES[node];
    if (inPlace) {
      if (suite !== "vm" || vm?.debian !== debian) {
        throw new PlanError(`VM step ${suite}@${node} runs in place, which only a vm step after a vm step on Debian ${debian} can`);
      }
    } else {
      vm = suite === "vm" ? { name: node, debian } : undefined;
    }
    return { vm: inPlace ? vm!.name : node, files: files ?? all };
  });
  return steps.map(({ suite, node, estimateS, packageCycleIn }, i) => {
    const { vm, files } = placed[i]!;
    if (packageCycleIn !== undefined) {
      const taker = steps.findIndex((step, j) => j > i && step.node === packageCycleIn && step.inPlace && placed[j]!.vm === vm);
      if (!files.includes(PACKAGE_CYCLE_FILE) || taker < 0 || !placed[taker]!.files.includes(PACKAGE_CYCLE_FILE)) {
        throw new PlanError(
          `VM step ${suite}@${node} hands the package's upgrade cycle to ${packageCycleIn}, which must be a later in-place step on its VM, both running ${PACKAGE_CYCLE_FILE}`,
        );
      }
    }
    const { debian, engine } = VM_NODES[node];
    const cycle = packageCycleIn === undefined ? "-" : `vm@${packageCycleIn}`;
    return [suite, node, debian, engine, vm, estimateS, mayLengthenRun(steps[i]!) ? 1 : 0, cycle, ...files].join(" ");
  });
}

/** Where the run is when the chain's next step could start (vm.sh's vm_step_begins). */
export interface VmChainClock {
  /** Seconds since the run began. */
  ageS: number;
  /** The chain's first step: what it was expected to take, and took. */
  first: { estimateS: number; tookS: number };
  /** Whether the host's suites have all ended (the run then waits on the chain alone). */
  hostEnded: boolean;
  /** By how many seconds of the run every step must be expected to end (CRIDOCK_VM_BUDGET_S). */
  budgetS: number;
}

export type VmStepDecision = { start: true; expectedEndS: number } | { start: false; reason: string };

/**
 * Whether a step after the chain's first starts. It is expected to take its
 * estimate times the machine's pace: how much longer than its estimate the
 * first step took (never less than 1: a machine is not counted faster than
 * the one measured, and a first step that failed early says nothing). It
 * starts when it is expected to end within the budget. Once the host's
 * suites have ended, only a step the run may wait for starts
 * (mayLengthenRun: in place, the engines of 2026 on the VM already up, or
 * one whose files only the cgroup v2 node can test); any other step that
 * boots a VM of its own starts only while they run, so that it uses time
 * the run takes anyway. What does not start is counted as skipped, with
 * the reason.
 */
export function vmStepDecision(step: { estimateS: number; mayLengthenRun: boolean }, clock: VmChainClock): VmStepDecision {
  const pace = Math.max(1, clock.first.tookS / Math.max(1, clock.first.estimateS));
  const expectedS = Math.round(step.estimateS * pace);
  const expectedEndS = clock.ageS + expectedS;
  const paceText = `${pace.toFixed(2)}x its estimate, as the first step took ${clock.first.tookS} s for ${clock.first.estimateS}`;
  if (expectedEndS > clock.budgetS) {
    return {
      start: false,
      reason: `not started: at ${clock.ageS} s into the run, taking ${expectedS} s (${paceText}) it would end past CRIDOCK_VM_BUDGET_S (${clock.budgetS} s); this machine's emulated CPU is too slow for it to fit CI's time`,
    };
  }
  if (!step.mayLengthenRun && clock.hostEnded) {
    return {
      start: false,
      reason: `not started: the host's suites had ended at ${clock.ageS} s into the run, and a node of its own (${expectedS} s, ${paceText}) for what the host's suites cover would only lengthen the run`,
    };
  }
  return { start: true, expectedEndS };
}

/** The Debian releases the VM chain's nodes boot (each needs its image), the first step's first. */
export function vmReleases(chain: readonly VmStep[] = VM_CHAIN): string[] {
  return [...new Set(chain.map(({ node }) => VM_NODES[node].debian))];
}

/**
 * The regular files named *.test.ts at or under ROOT (relative to
 * repoRoot), as `find ROOT -type f -name '*.test.ts'` lists them: symbolic
 * links are neither followed nor listed; a missing ROOT has none.
 */
export function findTestFiles(repoRoot: string, root: string): string[] {
  const found: string[] = [];
  const visit = (path: string) => {
    let stat;
    try {
      stat = lstatSync(join(repoRoot, path));
    } catch {
      return;
    }
    if (stat.isFile()) {
      if (posix.basename(path).endsWith(".test.ts")) found.push(path);
    } else if (stat.isDirectory()) {
      for (const name of readdirSync(join(repoRoot, path))) visit(posix.join(path, name));
    }
  };
  visit(root);
  return found;
}

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

function main(argv: string[], env: NodeJS.ProcessEnv): string[] {
  const [command, ...args] = argv;
  if (command === "plan") return planLines(makePlan(args, env));
  if (command === "vm-chain") return vmChainLines(args, VM_CHAIN, (root) => findTestFiles(REPO_ROOT, root));
  if (command === "vm-releases" && args.length === 0) return vmReleases();
  if (command === "vm-step" && args.length === 7) {
    const [estimate, lengthens, age, firstEstimate, firstTook, hostEnded, budget] = args.map((a) => Number(a));
    if ([estimate, lengthens, age, firstEstimate, firstTook, hostEnded, budget].some((n) => !Number.isInteger(n) || n! < 0)) {
      throw new PlanError(`vm-step takes 7 whole numbers, not: ${args.join(" ")}`);
    }
    const decision = vmStepDecision(
      { estimateS: estimate!, mayLengthenRun: lengthens === 1 },
      { ageS: age!, first: { estimateS: firstEstimate!, tookS: firstTook! }, hostEnded: hostEnded === 1, budgetS: budget! },
    );
    return [decision.start ? `start ${decision.expectedEndS}` : `skip ${decision.reason}`];
  }
  if (command === "files" && args.length === 3) {
    const [suite, engine, primary] = args as [string, string, string];
    return suiteFiles(suite, engine, primary, (root) => findTestFiles(REPO_ROOT, root));
  }
  throw new PlanError(
    "usage: tsx scripts/suite/plan.ts plan [SUITE...] | files SUITE ENGINE PRIMARY | vm-chain VM-SUITE... | vm-releases" +
      " | vm-step ESTIMATE LENGTHENS(0|1) AGE FIRST-ESTIMATE FIRST-TOOK HOST-ENDED(0|1) BUDGET",
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    const lines = main(process.argv.slice(2), process.env);
    if (lines.length > 0) process.stdout.write(lines.join("\n") + "\n");
  } catch (err) {
    // test.sh's own error prefix (common.sh's die): the line reads as it did when test.sh decided this.
    console.error(`cridock-env: error: ${(err as Error).message}`);
    process.exit(1);
  }
}
