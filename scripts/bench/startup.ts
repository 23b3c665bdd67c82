/**
 * Start-to-serving time and idle memory of cridock's three ways to run:
 * the self-contained executable (dist/cridock-linux-x64), the bundle on
 * Node (node dist/cridock.js) and the sources through tsx (bin/cridock.js
 * with CRIDOCK_FROM_SOURCE=1). Each round starts one of them on a scratch
 * socket and root, times the spawn until a CRI Version call is answered
 * (which needs dockerd's answer: --docker-endpoint), waits, reads the
 * process's resident memory (VmRSS, and RssAnon: what is not shared with
 * other processes running the same binary), and stops it. Rounds alternate
 * between the ways so that the machine's load hits them alike.
 *
 *   tsx scripts/bench/startup.ts [--rounds 5] [--idle-seconds 10]
 *        [--docker-endpoint unix:///var/run/docker.sock]
 *
 * Build the executable and the bundle first (npm run build:binary, npm run build).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CriClient } from "../../test/helpers/cri-client.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

interface Way {
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  size: number;
}

interface Sample {
  servingMs: number;
  rssMiB: number;
  anonMiB: number;
}

function ways(): Way[] {
  const found: Way[] = [];
  const exe = join(root, "dist/cridock-linux-x64");
  if (existsSync(exe)) found.push({ name: "executable", command: exe, args: [], size: statSync(exe).size });
  const bundle = join(root, "dist/cridock.js");
  if (existsSync(bundle)) found.push({ name: "bundle on node", command: process.execPath, args: [bundle], size: statSync(bundle).size });
  found.push({ name: "sources via tsx", command: process.execPath, args: [join(root, "bin/cridock.js")], env: { CRIDOCK_FROM_SOURCE: "1" }, size: 0 });
  return found;
}

function memoryOf(pid: number): { rssMiB: number; anonMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rssMiB: kib("VmRSS") / 1024, anonMiB: kib("RssAnon") / 1024 };
}

async function once(way: Way, dockerEndpoint: string, idleSeconds: number): Promise<Sample> {
  const scratch = await mkdtemp(join(tmpdir(), "cridock-bench-startup-"));
  const socket = join(scratch, "cri.sock");
  const started = process.hrtime.bigint();
  const child = spawn(
    way.command,
    [...way.args, `--container-runtime-endpoint=unix://${socket}`, `--root-directory=${join(scratch, "root")}`, `--docker-endpoint=${dockerEndpoint}`, "--network-plugin=no-op", "--cri-dockerd-root-directory=", "--log-level=warn"],
    { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, NODE_OPTIONS: "", UV_THREADPOOL_SIZE: "16", ...way.env } },
  );
  try {
    const client = new CriClient(socket);
    let served = false;
    for (let i = 0; i < 2000 && !served && child.exitCode === null; i++) {
      served = await client.call("Version", {}).then(() => true, () => false);
      if (!served) await new Promise((r) => setTimeout(r, 10));
    }
    const servingMs = Number(process.hrtime.bigint() - started) / 1e6;
    client.close();
    if (!served) throw new Error(`${way.name} did not serve Version`);
    await new Promise((r) => setTimeout(r, idleSeconds * 1000));
    return { servingMs, ...memoryOf(child.pid!) };
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    await rm(scratch, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      rounds: { type: "string", default: "5" },
      "idle-seconds": { type: "string", default: "10" },
      "docker-endpoint": { type: "string", default: "unix:///var/run/docker.sock" },
    },
  });
  const rounds = Number(values.rounds);
  const all = ways();
  const samples = new Map<string, Sample[]>(all.map((w) => [w.name, []]));
  for (let r = 0; r < rounds; r++) {
    for (const way of all) samples.get(way.name)!.push(await once(way, values["docker-endpoint"]!, Number(values["idle-seconds"])));
  }
  console.log(`${rounds} rounds, median; idle ${values["idle-seconds"]} s after the first Version answer; dockerd at ${values["docker-endpoint"]}`);
  for (const way of all) {
    const s = samples.get(way.name)!;
    const size = way.size ? `${(way.size / 1024 / 1024).toFixed(1)} MiB` : "-";
    console.log(
      `${way.name.padEnd(16)} size ${size.padStart(9)}  start to serving ${median(s.map((x) => x.servingMs)).toFixed(0).padStart(5)} ms  RSS ${median(s.map((x) => x.rssMiB)).toFixed(1)} MiB (anonymous ${median(s.map((x) => x.anonMiB)).toFixed(1)} MiB)`,
    );
  }
  recordResult("startup", {
    command: commandLine("scripts/bench/startup.ts"),
    columns: ["way", "size", "start to serving", "RSS idle", "of which anonymous"],
    rows: all.map((way) => {
      const s = samples.get(way.name)!;
      return [
        way.name,
        way.size ? `${(way.size / 1024 / 1024).toFixed(1)} MiB` : "-",
        `${median(s.map((x) => x.servingMs)).toFixed(0)} ms`,
        `${median(s.map((x) => x.rssMiB)).toFixed(1)} MiB`,
        `${median(s.map((x) => x.anonMiB)).toFixed(1)} MiB`,
      ];
    }),
    note: `${rounds} alternating rounds, medians; RSS ${values["idle-seconds"]} s after the first Version answer.`,
  });
}
