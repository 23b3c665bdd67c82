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
 *
 * An unknown engine or suite is refused: one line on stderr, exit 1.
 *
 * Usage: tsx scripts/suite/plan.ts plan [SUITE...] | files SUITE ENGINE PRIMARY
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

/**
 * The VM suites' steps, in the order they run: a suite on a node, and the
 * suite's files there (all of test/SUITE when none are named). Each node
 * runs a different engine's part, so that the engines of 2026 are all on
 * cgroup v2 with the systemd driver without every file running on each
 * (CI's time: the guest's CPU is emulated):
 * - vm on Debian 13's own docker.io 26.1: everything;
 * - vm-lifecycle (reboots, CheckpointContainer through CRIU), which only a
 *   VM can test: Engine 29 with the classic store and runc 1.5;
 * - vm-kubeadm (a cluster's control plane, resize, swap) on Debian 12's
 *   20.10: on Debian 13 with Engine 29's containerd store kubeadm's API
 *   server answered only "TLS handshake timeout" until kubeadm's wait ran
 *   out, its guest's load at 13 beside one more VM (docs/testing.md);
 * - vm on Debian 12, the oldest engine supported: the package's install
 *   and kubelet's pods.
 * Engine 29 with the containerd image store (a fresh install's) runs
 * kubelet's pods on request (CRIDOCK_VM_ENGINE=docker29-containerd): it
 * passed them, and CI's time has no room for another node.
 * In CI's background chain a step after the first starts only before a
 * deadline (scripts/suite/vm.sh), so the order is what matters most first.
 * Any node runs any file: CRIDOCK_VM_DEBIAN and CRIDOCK_VM_ENGINE pick one
 * for a file run alone (docs/testing.md, "The cgroup v2 node").
 */
export const VM_CHAIN: ReadonlyArray<{ suite: (typeof VM_SUITES)[number]; node: VmNodeName; files?: readonly string[] }> = [
  { suite: "vm", node: "debian13" },
  { suite: "vm-lifecycle", node: "debian13-docker29" },
  { suite: "vm-kubeadm", node: "debian12" },
  { suite: "vm", node: "debian12", files: ["test/vm/package.test.ts", "test/vm/pods.test.ts"] },
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
  if (has("e2e", "cluster", ...VM_SUITES) || tests) steps.push("kubernetes");
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

/**
 * The VM chain's steps of these suites as the lines scripts/suite/vm.sh
 * reads, one a step: `SUITE NODE DEBIAN ENGINE FILE...`. A file a step
 * names must be one of its suite's, so that a renamed file cannot quietly
 * drop out of a run.
 */
export function vmChainLines(suites: string[], chain: typeof VM_CHAIN, find: (root: string) => string[]): string[] {
  for (const suite of suites) {
    if (!(VM_SUITES as readonly string[]).includes(suite)) throw new PlanError(`'${suite}' is not a VM suite (${VM_SUITES.join(", ")})`);
  }
  return chain
    .filter(({ suite }) => suites.includes(suite))
    .map(({ suite, node, files }) => {
      const all = find(`test/${suite}`).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const file of files ?? []) {
        if (!all.includes(file)) throw new PlanError(`VM node ${node} names ${file}, which is not a test file of test/${suite}`);
      }
      const { debian, engine } = VM_NODES[node];
      return [suite, node, debian, engine, ...(files ?? all)].join(" ");
    });
}

/** The Debian releases the VM chain's nodes boot (each needs its image), the first step's first. */
export function vmReleases(chain: typeof VM_CHAIN = VM_CHAIN): string[] {
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
  if (command === "files" && args.length === 3) {
    const [suite, engine, primary] = args as [string, string, string];
    return suiteFiles(suite, engine, primary, (root) => findTestFiles(REPO_ROOT, root));
  }
  throw new PlanError("usage: tsx scripts/suite/plan.ts plan [SUITE...] | files SUITE ENGINE PRIMARY | vm-chain VM-SUITE... | vm-releases");
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
