/**
 * Scraping a cridock /metrics endpoint in tests: a free loopback port to
 * bind it on, and the exposition text (cridock's or kubelet's) parsed into
 * series → value.
 */
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";

/**
 * A loopback port free now, for a server started a little later (cridock's
 * metrics, kubelet's API). Taken below the kernel's ephemeral range: a port
 * the kernel hands out (listen on 0) may be given to any outgoing
 * connection before the server binds it, as a CI run's kubelet found
 * ("bind: address already in use" on a port from listen(0), seconds
 * later). Below the range only an explicit bind competes.
 */
export async function freePort(): Promise<number> {
  const ephemeralLow = await readFile("/proc/sys/net/ipv4/ip_local_port_range", "utf8").then(
    (text) => Number(text.trim().split(/\s+/)[0]),
    () => 32768,
  );
  const low = 10_000;
  const high = Number.isInteger(ephemeralLow) && ephemeralLow > low + 1000 ? ephemeralLow - 1 : 32767;
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free loopback port found between ${low} and ${high} in 200 tries`);
}

/** Whether a listener can bind 127.0.0.1:port now (it is closed again before this resolves). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

export type Samples = Map<string, number>;

/** GET /metrics → `name{labels}` → value (comments dropped). */
export async function scrape(port: number): Promise<Samples> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return parseExposition(await response.text());
}

/** Prometheus' text exposition (cridock's, kubelet's) → `name{labels}` → value. */
export function parseExposition(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The value of a series, 0 when absent (a counter not yet incremented). */
export function value(samples: Samples, series: string): number {
  return samples.get(series) ?? 0;
}

/** The sum over every series of `name` whose labels contain all of `labels` (`k="v"` fragments). */
export function sum(samples: Samples, name: string, ...labels: string[]): number {
  let total = 0;
  for (const [series, v] of samples) {
    const bare = series.split("{", 1)[0];
    if (bare === name && labels.every((l) => series.includes(l))) total += v;
  }
  return total;
}
