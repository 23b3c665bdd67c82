/**
 * Runs critest against a cridock child process (Node, or Deno with
 * --runtime deno): cridock gets its own socket and root directory, the local
 * pause image and a throwaway CNI configuration; critest gets the focus and
 * skip lists of this directory and any extra flags given. critest pulls its
 * own images by their upstream names, which the test environment's mirror
 * registry serves (scripts/env/mirror.sh). Prints a summary line and,
 * with --result-json, writes the counts for scripts/test.sh.
 *
 * Usage: tsx test/conformance/run.ts [--result-json FILE] [--timeout SECONDS] [--runtime node|deno] [-- extra critest flags]
 * (run.sh beside this file passes unknown arguments on to critest).
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startCridockProcess, type CridockProcess } from "../helpers/cridock-process.ts";
import { CRITEST, CRI_TOOLS_BIN_DIR, TEST_DOCKER_ENDPOINT, TEST_DOCKER_SOCKET, cridockTestFlags, makeCniConfDir } from "../helpers/env.ts";
import { request } from "node:http";
import { countJunit, countSummaryLine, type SpecCounts } from "./junit.ts";
import { ginkgoFlags, readFocusDir, readSkipFile, skipsForEngine } from "./spec-lists.ts";

const HERE = fileURLToPath(new URL(".", import.meta.url));

type Runtime = "node" | "deno";

interface Options {
  resultJson?: string;
  timeoutSeconds: number;
  /** What runs cridock; CRIDOCK_CONFORMANCE_RUNTIME sets the default. */
  runtime: Runtime;
  critestArgs: string[];
}

function parseRuntime(value: string | undefined): Runtime {
  if (value === "node" || value === "deno") return value;
  throw new Error(`--runtime (or CRIDOCK_CONFORMANCE_RUNTIME) must be node or deno, not "${value}"`);
}

function parseOptions(argv: string[]): Options {
  const options: Options = {
    timeoutSeconds: 45 * 60,
    runtime: parseRuntime(process.env.CRIDOCK_CONFORMANCE_RUNTIME ?? "node"),
    critestArgs: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--result-json") options.resultJson = argv[++i];
    else if (arg === "--timeout") options.timeoutSeconds = Number(argv[++i]);
    else if (arg === "--runtime") options.runtime = parseRuntime(argv[++i]);
    else if (arg === "--") options.critestArgs.push(...argv.slice(i + 1)), (i = argv.length);
    else options.critestArgs.push(arg);
  }
  if (!(options.timeoutSeconds > 0)) throw new Error("--timeout needs a positive number of seconds");
  return options;
}

/** The version the test engine reports (GET /version), which selects the engine-specific skips. */
function dockerVersion(): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: TEST_DOCKER_SOCKET, path: "/version", timeout: 10_000 }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => {
        try {
          resolve(String((JSON.parse(body) as { Version?: unknown }).Version ?? ""));
        } catch (err) {
          reject(new Error(`the engine at ${TEST_DOCKER_ENDPOINT} answered /version with no JSON`, { cause: err }));
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (err) => reject(new Error(`cannot ask the engine at ${TEST_DOCKER_ENDPOINT} its version: ${err.message}`)));
    req.end();
  });
}

/** Signals a process group whose leader may be gone (its members may not be). */
function signalGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the whole group has exited already.
  }
}

/** Runs critest to its end (or kills it at the deadline); resolves to its exit code and its output. */
function runCritest(args: string[], cwd: string, timeoutSeconds: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(CRITEST, args, {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      // critest -parallel=N runs the ginkgo CLI from the PATH, which install-cri-tools.sh puts beside it.
      env: { ...process.env, PATH: `${CRI_TOOLS_BIN_DIR}:${process.env.PATH ?? ""}` },
      // Its own process group: with -parallel, ginkgo and its N critest processes go with it at the deadline.
      detached: true,
    });
    let output = "";
    const relay = (stream: NodeJS.WriteStream) => (chunk: Buffer) => {
      output += chunk.toString();
      stream.write(chunk);
    };
    child.stdout!.on("data", relay(process.stdout));
    child.stderr!.on("data", relay(process.stderr));
    const timer = setTimeout(() => {
      process.stderr.write(`conformance: critest ran past ${timeoutSeconds}s; stopping it\n`);
      signalGroup(child.pid, "SIGTERM");
      setTimeout(() => signalGroup(child.pid, "SIGKILL"), 10_000).unref();
    }, timeoutSeconds * 1000);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${CRITEST} (scripts/env/install-cri-tools.sh builds it): ${err.message}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

async function writeResult(options: Options, counts: SpecCounts): Promise<void> {
  if (options.resultJson) await writeFile(options.resultJson, JSON.stringify(counts) + "\n");
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const userFocus = options.critestArgs.some((a) => /^--?ginkgo\.focus/.test(a));
  const focus = userFocus ? [] : await readFocusDir(join(HERE, "focus"));
  const engineVersion = await dockerVersion();
  const skip = skipsForEngine(await readSkipFile(join(HERE, "skip.txt")), engineVersion);
  console.log(`conformance: engine ${TEST_DOCKER_ENDPOINT} (Docker ${engineVersion}); skipped here:`);
  for (const p of skip) console.log(`conformance:   skip ${p.regex}  # ${p.reason}`);
  if (!userFocus && focus.length === 0) {
    console.log("conformance: no focus lines in test/conformance/focus/*.txt; no critest spec to run");
    await writeResult(options, { passed: 0, failed: 0, skipped: 0, failures: [] });
    return 0;
  }

  const work = await mkdtemp(join(tmpdir(), "cridock-conformance-"));
  const junitFile = join(work, "junit.xml");
  const cni = await makeCniConfDir();
  const cridock = await startCridockProcess({
    flags: cridockTestFlags(cni),
    runtime: options.runtime,
    // Deno compiles the sources on its first start.
    startTimeoutMs: options.runtime === "deno" ? 120_000 : 60_000,
  }).catch(async (err) => {
    await cni.cleanup();
    throw err;
  });
  let result: { code: number | null; output: string };
  try {
    const args = [
      `-runtime-endpoint=unix://${cridock.socketPath}`,
      `-ginkgo.junit-report=${junitFile}`,
      "-ginkgo.no-color",
      ...ginkgoFlags(focus, skip),
      ...options.critestArgs,
    ];
    console.log(`conformance: cridock under ${options.runtime}; critest ${args.join(" ")}`);
    result = await runCritest(args, work, options.timeoutSeconds);
  } finally {
    await removeLeftoverSandboxes(cridock);
    await cridock.stop();
    await writeFile(join(work, "cridock.log"), cridock.logs());
    await cni.cleanup();
  }

  let counts: SpecCounts | null = null;
  try {
    counts = countJunit(await readFile(junitFile, "utf8"));
  } catch {
    counts = countSummaryLine(result.output);
  }
  if (!counts) {
    // critest died before reporting: one failure, so the run cannot look green.
    counts = { passed: 0, failed: 1, skipped: 0, failures: [`critest exited with ${result.code} and no report`] };
  } else if (result.code !== 0 && counts.failed === 0) {
    counts.failed = 1;
    counts.failures.push(`critest exited with ${result.code}`);
  }
  await writeResult(options, counts);
  for (const name of counts.failures) console.log(`conformance: FAILED ${name}`);
  const line = `conformance: critest specs: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} not run`;
  if (counts.failed === 0) {
    await rm(work, { recursive: true, force: true });
    console.log(line);
    return 0;
  }
  // Kept for whoever looks into the failure.
  console.log(`${line} (JUnit report and cridock log in ${work})`);
  return 1;
}

/**
 * Specs that fail (or a critest that is killed) leave pods behind. Remove,
 * through CRI so their networks are torn down, every sandbox this cridock
 * still has a checkpoint for — only its own, never another instance's on the
 * same dockerd.
 */
async function removeLeftoverSandboxes(cridock: CridockProcess): Promise<void> {
  const files = await readdir(join(cridock.rootDirectory, "sandbox")).catch(() => [] as string[]);
  const ids = files.filter((f) => /^[0-9a-f]{64}\.json$/.test(f)).map((f) => f.slice(0, 64));
  if (ids.length === 0) return;
  console.log(`conformance: removing ${ids.length} pod sandbox(es) critest left behind`);
  for (const podSandboxId of ids) {
    try {
      await cridock.client.call("StopPodSandbox", { podSandboxId }, { timeoutMs: 120_000 });
      await cridock.client.call("RemovePodSandbox", { podSandboxId }, { timeoutMs: 120_000 });
    } catch (err) {
      console.log(`conformance: could not remove sandbox ${podSandboxId}: ${(err as Error).message}`);
    }
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`conformance: ${err.message}`);
    process.exit(1);
  },
);
