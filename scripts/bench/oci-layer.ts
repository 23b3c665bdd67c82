/**
 * Benchmark: what cridock's OCI runtime layer (src/oci/) adds to a
 * container's start, beside plain runc, on one dockerd of its own (its own
 * daemon.json: the node's engines are never reconfigured). Three kinds of
 * start, interleaved round by round, each a fresh container's Docker start
 * call timed from request to answer:
 *   runc          Docker's default runtime;
 *   layer         the layer's runtime, no edits: the launcher's shell and
 *                 one exec, as for every call but a create with edits;
 *   layer+edits   the layer's runtime with spec edits recorded: the launcher
 *                 runs `cridock oci-edit`, which rewrites config.json (the
 *                 edits are empty, so that this runs on cgroup v1 too, where
 *                 runc refuses unified keys; their size does not matter).
 * Also `runc exec` through the layer against plain runc (an exec probe's
 * path). Prints medians, 90th percentiles and the ratios to runc.
 *
 * The layer runs `cridock oci-edit` as installed: from the self-contained
 * executable (npm run build:binary), as the .deb installs it, unless
 * --cridock names another command.
 *
 *   npx tsx scripts/bench/oci-layer.ts [--rounds 30] [--cridock dist/cridock-linux-x64] [--dockerd <binary>]
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { DockerClient } from "../../src/docker/client.ts";
import { silentLogger } from "../../src/log.ts";
import { SpecEditsStore } from "../../src/oci/edits-store.ts";
import { BUSYBOX_IMAGE } from "../../test/helpers/env.ts";
import { privateDockerd } from "../../test/helpers/private-dockerd.ts";
import { median } from "./lib/stats.ts";

const REPO = resolve(import.meta.dirname, "../..");
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "30" },
    cridock: { type: "string", default: join(REPO, "dist/cridock-linux-x64") },
    dockerd: { type: "string" },
  },
});
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`--rounds ${values.rounds} is not a positive number`);
const CRIDOCK = resolve(values.cridock!);
if (!existsSync(CRIDOCK)) throw new Error(`${CRIDOCK} is missing: npm run build:binary builds it (or name one with --cridock)`);

const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))]!;
const ms = (x: number) => `${x.toFixed(1)} ms`;

const dockerd = await privateDockerd({ bridge: "cridock-bo0", configFile: true, binary: values.dockerd });
const work = mkdtempSync(join(tmpdir(), "cridock-bench-oci-"));
const docker = new DockerClient({ endpoint: dockerd.endpoint, requestTimeoutMs: 120_000, logger: silentLogger });
try {
  await dockerd.start();
  const editsDir = join(work, "edits");
  const install = spawnSync(
    CRIDOCK,
    ["oci-layer", "install", `--docker-endpoint=${dockerd.endpoint}`, `--daemon-json=${dockerd.configFile}`, `--docker-pid-file=${dockerd.pidFile}`, `--launcher=${join(work, "oci-runtime")}`, `--edits-dir=${editsDir}`],
    { encoding: "utf8" },
  );
  if (install.status !== 0) throw new Error(`cridock oci-layer install failed: ${install.stderr}`);
  process.stderr.write(install.stdout);
  const pulled = await docker.raw("POST", "/images/create", { query: { fromImage: BUSYBOX_IMAGE.replace(/:[^:/]+$/, ""), tag: BUSYBOX_IMAGE.split(":").at(-1)! } });
  for await (const _ of pulled.body) void _;
  const store = new SpecEditsStore(editsDir);

  type Kind = "runc" | "layer" | "layer+edits";
  const starts: Record<Kind, number[]> = { runc: [], layer: [], "layer+edits": [] };
  const execs: Record<"runc" | "layer", number[]> = { runc: [], layer: [] };
  const once = async (kind: Kind, round: number) => {
    const { Id } = await docker.createContainer(`bench-${kind.replace("+", "-")}-${round}`, {
      Image: BUSYBOX_IMAGE,
      Cmd: ["sleep", "300"],
      HostConfig: kind === "runc" ? {} : { Runtime: "cridock" },
    });
    if (kind === "layer+edits") await store.write(Id, { version: 1 });
    const since = performance.now();
    await docker.startContainer(Id);
    starts[kind].push(performance.now() - since);
    await store.remove(Id);
    if (kind !== "layer+edits") {
      const exec = await docker.execCreate(Id, { Cmd: ["true"], AttachStdout: true });
      const t0 = performance.now();
      const stream = await docker.execStart(exec.Id, { tty: false });
      for await (const _ of stream) void _;
      execs[kind].push(performance.now() - t0);
    }
    await docker.removeContainer(Id, { force: true });
  };
  const kinds: Kind[] = ["runc", "layer", "layer+edits"];
  for (let round = 0; round < ROUNDS; round++) {
    // A different order each round: none of them always runs first after a removal.
    for (let i = 0; i < kinds.length; i++) await once(kinds[(round + i) % kinds.length]!, round);
    if ((round + 1) % 10 === 0) process.stderr.write(`oci-layer bench: ${round + 1}/${ROUNDS} rounds\n`);
  }
  const base = median(starts.runc);
  console.log(`container start (Docker's start call), ${ROUNDS} rounds, ${(await docker.version()).Version}:`);
  for (const kind of kinds) {
    const m = median(starts[kind]);
    console.log(`  ${kind.padEnd(12)} median ${ms(m).padStart(9)}  p90 ${ms(p90(starts[kind])).padStart(9)}  ${(m / base).toFixed(2)}x runc  (+${ms(m - base)})`);
  }
  const execBase = median(execs.runc);
  console.log(`exec (create to stream end): runc ${ms(execBase)}, layer ${ms(median(execs.layer))} (${(median(execs.layer) / execBase).toFixed(2)}x)`);
  spawnSync(CRIDOCK, ["oci-layer", "uninstall", `--docker-endpoint=${dockerd.endpoint}`, `--daemon-json=${dockerd.configFile}`, `--docker-pid-file=${dockerd.pidFile}`, `--launcher=${join(work, "oci-runtime")}`, `--edits-dir=${editsDir}`]);
} finally {
  await docker.close();
  await dockerd.destroy();
  rmSync(work, { recursive: true, force: true });
}
