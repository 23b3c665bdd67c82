/**
 * Scraping a cridock /metrics endpoint in tests: a free loopback port to
 * bind it on, and the exposition text (cridock's or kubelet's) parsed into
 * series → value.
 */
import { createServer } from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
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
