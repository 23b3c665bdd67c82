/**
 * ListImages through cridock against the same `GET /images/json` issued
 * directly to dockerd, with (at least) 200 images present, interleaved in one
 * run. Prints the medians and their ratio (target: ≤ 1.3).
 *
 * Creates its own images (cridock-bench/list-<n>:1, imported from a tiny tar
 * with a distinct label each) when dockerd holds fewer than 200, and removes
 * exactly those at the end.
 *
 * Usage: tsx scripts/bench/list-images.ts [--images 200] [--rounds 50]
 */
import { request, Agent } from "node:http";
import { parseArgs } from "node:util";
import { startCridockProcess } from "../../test/helpers/cridock-process.ts";
import { commandLine, recordResult } from "./lib/results.ts";

const DOCKER_SOCKET = "/var/run/docker.sock";
const BENCH_REPO = "cridock-bench/list";
const agent = new Agent({ keepAlive: true, maxSockets: 4 });

function docker(method: string, path: string, body?: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: DOCKER_SOCKET, path, method, agent, timeout: 60_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("timeout", () => req.destroy(new Error(`dockerd did not answer ${method} ${path}`)));
    req.on("error", reject);
    if (body) req.setHeader("content-type", "application/x-tar");
    req.end(body);
  });
}

/** A one-file tar archive (512-byte header + content block + two zero blocks). */
function tinyTar(): Buffer {
  const content = Buffer.from("cridock list-images benchmark\n");
  const header = Buffer.alloc(512);
  header.write("bench.txt", 0);
  header.write("0000644\0", 100);
  header.write("0000000\0", 108);
  header.write("0000000\0", 116);
  header.write(content.length.toString(8).padStart(11, "0") + "\0", 124);
  header.write("00000000000\0", 136);
  header.write("        ", 148);
  header.write("0", 156);
  header.write("ustar\0", 257);
  header.write("00", 263);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
  const data = Buffer.alloc(512);
  content.copy(data);
  return Buffer.concat([header, data, Buffer.alloc(1024)]);
}

async function importImage(n: number, tar: Buffer): Promise<void> {
  const query = new URLSearchParams({ fromSrc: "-", repo: BENCH_REPO, tag: String(n), changes: `LABEL cridock.bench=${n}` });
  const res = await docker("POST", `/images/create?${query}`, tar);
  if (res.status !== 200 || res.text.includes('"error"')) throw new Error(`import of ${BENCH_REPO}:${n} failed: ${res.text}`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { images: { type: "string", default: "200" }, rounds: { type: "string", default: "50" } } });
  const wanted = Number(values.images);
  const rounds = Number(values.rounds);

  const existing = JSON.parse((await docker("GET", "/images/json")).text) as { Id: string }[];
  const created: string[] = [];
  const tar = tinyTar();
  for (let n = 0; existing.length + created.length < wanted; n++) {
    await importImage(n, tar);
    created.push(`${BENCH_REPO}:${n}`);
  }
  const cridock = await startCridockProcess({ flags: ["--network-plugin=no-op", "--log-level=warn"] });
  try {
    const direct = async () => {
      const res = await docker("GET", `/images/json?${new URLSearchParams({ filters: "{}" })}`);
      return (JSON.parse(res.text) as unknown[]).length;
    };
    const viaCridock = async () => ((await cridock.client.imageCall("ListImages", {})).images as unknown[]).length;

    // Warm-up: connections, JIT, and cridock's per-image USER cache.
    for (let i = 0; i < 5; i++) {
      await direct();
      await viaCridock();
    }
    const count = await direct();
    const listed = await viaCridock();
    if (listed !== count) throw new Error(`cridock listed ${listed} images, dockerd ${count}`);

    const directMs: number[] = [];
    const cridockMs: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // Alternate the order so neither side always runs on a warmer dockerd.
      const pair: [() => Promise<number>, number[]][] = [
        [direct, directMs],
        [viaCridock, cridockMs],
      ];
      if (i % 2) pair.reverse();
      for (const [fn, samples] of pair) {
        const started = performance.now();
        await fn();
        samples.push(performance.now() - started);
      }
    }
    const d = median(directMs);
    const c = median(cridockMs);
    console.log(`images in dockerd: ${count} (${created.length} created for the benchmark), rounds: ${rounds}`);
    console.log(`GET /images/json direct: median ${d.toFixed(2)} ms`);
    console.log(`ListImages via cridock:  median ${c.toFixed(2)} ms`);
    console.log(`ratio (cridock / direct): ${(c / d).toFixed(2)} (target <= 1.3)`);
    recordResult("list-images", {
      command: commandLine("scripts/bench/list-images.ts"),
      columns: ["images", "GET /images/json, median (ms)", "ListImages via cridock, median (ms)", "ratio"],
      rows: [[count, d.toFixed(2), c.toFixed(2), (c / d).toFixed(2)]],
      note: `${rounds} alternating rounds.`,
    });
  } finally {
    await cridock.stop();
    for (const ref of created) await docker("DELETE", `/images/${encodeURIComponent(ref)}?force=1`);
    agent.destroy();
  }
}

main().catch((err: Error) => {
  console.error(`benchmark failed: ${err.message}`);
  process.exit(1);
});
