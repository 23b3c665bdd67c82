/**
 * Benchmark: what cridock's OCI runtime layer (src/oci/) adds to a
 * container's start, beside plain runc. Four kinds of start, interleaved
 * round by round, each a fresh container's Docker start call timed from
 * request to answer, and its forced removal after:
 *   runc          Docker's default runtime;
 *   layer         the layer's runtime, no edits: the launcher's shell and
 *                 one exec, as for every call but a create with edits;
 *   layer+edits   the layer's runtime with spec edits recorded: the launcher
 *                 runs `cridock oci-edit`, which rewrites config.json (the
 *                 edits are empty, so that this runs on cgroup v1 too, where
 *                 runc refuses unified keys; their size does not matter);
 *   layer+userns  a pod sandbox's start in its own user namespace (kubelet's
 *                 mapping of 65536 ids): `cridock oci-edit` also bind-mounts
 *                 each image layer idmapped and puts an overlay over them,
 *                 and the removal unmounts them. Only where the node can
 *                 (src/oci/userns-support.ts); otherwise the reason is printed.
 * Also `runc exec` through the layer against plain runc (an exec probe's
 * path). Prints medians, 90th percentiles and the ratios to runc.
 *
 * By default the bench runs a dockerd of its own (its own daemon.json: the
 * node's engines are never reconfigured) and registers the layer there from
 * the self-contained executable (npm run build:binary), as the .deb
 * installs it, unless --cridock names another command. With
 * --docker-endpoint it uses that dockerd and the layer already registered
 * with it (a node with the .deb installed; --image must then be there).
 *
 *   npx tsx scripts/bench/oci-layer.ts [--rounds 30] [--cridock dist/cridock-linux-x64] [--dockerd <binary>]
 *   npx tsx scripts/bench/oci-layer.ts --docker-endpoint unix:///var/run/docker.sock --image busybox:1.36
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { DockerClient } from "../../src/docker/client.ts";
import type { ContainerCreateBody } from "../../src/docker/types.ts";
import { silentLogger } from "../../src/log.ts";
import { SpecEditsStore } from "../../src/oci/edits-store.ts";
import { procMapMatches, type UsernsMappings } from "../../src/oci/id-mappings.ts";
import { inspectLayer, type OciLayer } from "../../src/oci/layer.ts";
import { UsernsSupportProbe } from "../../src/oci/userns-support.ts";
import { createInUserns, usernsEdit } from "../../src/runtime/pod-userns.ts";
import { BUSYBOX_IMAGE } from "../../test/helpers/env.ts";
import { privateDockerd, type PrivateDockerd } from "../../test/helpers/private-dockerd.ts";
import { median } from "./lib/stats.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const REPO = resolve(import.meta.dirname, "../..");
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "30" },
    cridock: { type: "string", default: join(REPO, "dist/cridock-linux-x64") },
    dockerd: { type: "string" },
    "docker-endpoint": { type: "string" },
    image: { type: "string", default: BUSYBOX_IMAGE },
  },
});
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`--rounds ${values.rounds} is not a positive number`);
const NODE_DOCKERD = values["docker-endpoint"];
const CRIDOCK = resolve(values.cridock!);
if (!NODE_DOCKERD && !existsSync(CRIDOCK)) throw new Error(`${CRIDOCK} is missing: npm run build:binary builds it (or name one with --cridock)`);
const IMAGE = values.image!;
/** kubelet's mapping for a pod: 65536 ids at a multiple of 65536 (the bench's own block, high up). */
const POD_IDS: UsernsMappings = { uids: [{ containerId: 0, hostId: 65536 * 900, length: 65536 }], gids: [{ containerId: 0, hostId: 65536 * 900, length: 65536 }] };

const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))]!;
const ms = (x: number) => `${x.toFixed(1)} ms`;

const own: PrivateDockerd | undefined = NODE_DOCKERD ? undefined : await privateDockerd({ bridge: "cridock-bo0", configFile: true, binary: values.dockerd });
const work = mkdtempSync(join(tmpdir(), "cridock-bench-oci-"));
// The layer's idmapped rootfs lives below: every user must be able to pass through.
chmodSync(work, 0o711);
const docker = new DockerClient({ endpoint: own?.endpoint ?? NODE_DOCKERD!, requestTimeoutMs: 120_000, logger: silentLogger });
const layerFlags = own
  ? [`--docker-endpoint=${own.endpoint}`, `--daemon-json=${own.configFile}`, `--docker-pid-file=${own.pidFile}`, `--launcher=${join(work, "oci-runtime")}`, `--edits-dir=${join(work, "edits")}`, `--rootfs-dir=${join(work, "rootfs")}`, `--registration=${join(work, "oci-layer.json")}`]
  : [];
try {
  if (own) {
    await own.start();
    const install = spawnSync(CRIDOCK, ["oci-layer", "install", ...layerFlags], { encoding: "utf8" });
    if (install.status !== 0) throw new Error(`cridock oci-layer install failed: ${install.stderr}`);
    process.stderr.write(install.stdout);
    const pulled = await docker.raw("POST", "/images/create", { query: { fromImage: IMAGE.replace(/:[^:/]+$/, ""), tag: IMAGE.split(":").at(-1)! } });
    for await (const _ of pulled.body) void _;
  }
  const info = await docker.info();
  const state = await inspectLayer(info);
  if (!state.ready) throw new Error(`the OCI runtime layer is not ready on this dockerd: ${state.reason}`);
  const layer: OciLayer = state.layer;
  const store = new SpecEditsStore(layer.editsDir);
  const version = await docker.version();
  const userns = await new UsernsSupportProbe(
    async () => layer,
    async () => ({ ...info, apiVersion: version.ApiVersion }),
  ).current();
  if (!userns.ok) process.stderr.write(`oci-layer bench: no layer+userns starts here: ${userns.reason}\n`);

  type Kind = "runc" | "layer" | "layer+edits" | "layer+userns";
  const kinds: Kind[] = userns.ok ? ["runc", "layer", "layer+edits", "layer+userns"] : ["runc", "layer", "layer+edits"];
  const starts: Record<Kind, number[]> = { runc: [], layer: [], "layer+edits": [], "layer+userns": [] };
  const removals: Record<Kind, number[]> = { runc: [], layer: [], "layer+edits": [], "layer+userns": [] };
  const execs: Record<"runc" | "layer", number[]> = { runc: [], layer: [] };
  const once = async (kind: Kind, round: number) => {
    const body: ContainerCreateBody = { Image: IMAGE, Cmd: ["sleep", "300"], HostConfig: kind === "runc" ? {} : { Runtime: layer.runtime } };
    if (kind === "layer+userns") createInUserns(body, POD_IDS, layer);
    const { Id } = await docker.createContainer(`bench-${kind.replace("+", "-")}-${process.pid}-${round}`, body);
    if (kind === "layer+edits") await store.write(Id, { version: 1 });
    if (kind === "layer+userns") await store.write(Id, { version: 1, userns: usernsEdit(POD_IDS, true, []) });
    const since = performance.now();
    await docker.startContainer(Id);
    starts[kind].push(performance.now() - since);
    await store.remove(Id);
    // What is timed must be what it says: the first such start is checked in its own namespace.
    if (kind === "layer+userns" && round === 0) {
      const pid = (await docker.inspectContainer(Id)).State.Pid;
      const map = await readFile(`/proc/${pid}/uid_map`, "utf8");
      if (!procMapMatches(map, POD_IDS.uids)) throw new Error(`a layer+userns container's uid_map is ${JSON.stringify(map.trim())}, not the pod's mapping`);
    }
    if (kind === "runc" || kind === "layer") {
      const exec = await docker.execCreate(Id, { Cmd: ["true"], AttachStdout: true });
      const t0 = performance.now();
      const stream = await docker.execStart(exec.Id, { tty: false });
      for await (const _ of stream) void _;
      execs[kind].push(performance.now() - t0);
    }
    const t1 = performance.now();
    await docker.removeContainer(Id, { force: true });
    removals[kind].push(performance.now() - t1);
  };
  for (let round = 0; round < ROUNDS; round++) {
    // A different order each round: none of them always runs first after a removal.
    for (let i = 0; i < kinds.length; i++) await once(kinds[(round + i) % kinds.length]!, round);
    if ((round + 1) % 10 === 0) process.stderr.write(`oci-layer bench: ${round + 1}/${ROUNDS} rounds\n`);
  }
  const record: (string | number)[][] = [];
  const table = (what: string, samples: Record<Kind, number[]>) => {
    const base = median(samples.runc);
    console.log(`${what}, ${ROUNDS} rounds, Docker ${version.Version}:`);
    for (const kind of kinds) {
      const m = median(samples[kind]);
      console.log(`  ${kind.padEnd(13)} median ${ms(m).padStart(9)}  p90 ${ms(p90(samples[kind])).padStart(9)}  ${(m / base).toFixed(2)}x runc  (${m >= base ? "+" : "-"}${ms(Math.abs(m - base))})`);
      record.push([what, kind, ms(m), ms(p90(samples[kind])), (m / base).toFixed(2)]);
    }
  };
  table("container start (Docker's start call)", starts);
  table("forced removal of the running container", removals);
  const execBase = median(execs.runc);
  console.log(`exec (create to stream end): runc ${ms(execBase)}, layer ${ms(median(execs.layer))} (${(median(execs.layer) / execBase).toFixed(2)}x)`);
  record.push(["exec (create to stream end)", "layer", ms(median(execs.layer)), "–", (median(execs.layer) / execBase).toFixed(2)]);
  recordResult("oci-layer", {
    command: commandLine("scripts/bench/oci-layer.ts"),
    columns: ["what", "kind", "median", "p90", "× runc"],
    rows: record,
    note: `${ROUNDS} interleaved rounds, Docker ${version.Version}.`,
  });
  if (own) spawnSync(CRIDOCK, ["oci-layer", "uninstall", ...layerFlags]);
} finally {
  await docker.close();
  await own?.destroy();
  rmSync(work, { recursive: true, force: true });
}
