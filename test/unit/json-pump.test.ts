/**
 * The pump's buffers: a container that prints nothing must not hold an
 * output buffer (under Deno a new buffer is zeroed, hence resident), and
 * buffers made at the first read and entry still carry every line whole.
 */
import t from "tap";
import { JsonLogPump } from "../../src/logs/json-pump.ts";
import type { JsonLogTail } from "../../src/logs/json-tail.ts";
import { dockerEntry, silentLog } from "../helpers/json-log-fixture.ts";

/** A tail over `chunks`, one per read (what it has not handed out yet), as Docker's file would grow. */
function chunkedTail(chunks: string[]): JsonLogTail {
  const pending = chunks.map((c) => Buffer.from(c));
  const read = async (into: Buffer, at: number): Promise<number> => {
    const next = pending[0];
    if (!next) return 0;
    const n = next.copy(into, at);
    if (n === next.length) pending.shift();
    else pending[0] = next.subarray(n);
    return n;
  };
  return { read } as unknown as JsonLogTail;
}

function recordingPump(): { pump: JsonLogPump; written: string[] } {
  const written: string[] = [];
  const pump = new JsonLogPump({ sink: async (records) => void written.push(records.toString()), logger: silentLog });
  return { pump, written };
}

t.test("a pump whose reads find nothing holds no buffer", async (t) => {
  const { pump, written } = recordingPump();
  t.equal(pump.bufferBytes, 0, "nothing before the first read");
  const tail = chunkedTail([]);
  for (let i = 0; i < 3; i++) t.match(await pump.pull(tail), { bytes: 0, filled: false });
  t.equal(pump.bufferBytes, 0, "a silent log holds no buffer after its reads");
  t.same(written, []);
});

t.test("a read that fails gives its borrowed buffer back", async (t) => {
  const { pump } = recordingPump();
  const failing = { read: async () => Promise.reject(new Error("EIO")) } as unknown as JsonLogTail;
  await t.rejects(pump.pull(failing), /EIO/);
  t.equal(pump.bufferBytes, 0);
});

t.test("silent pumps reading at once each read into their own buffer, and none keeps it", async (t) => {
  // Reads that overlap must never share a buffer: each is held until its read resolves.
  const seen = new Set<ArrayBufferLike>();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const tail = {
    read: async (into: Buffer) => {
      t.notOk(seen.has(into.buffer), "a backing store no other read in flight holds");
      seen.add(into.buffer);
      await gate;
      return 0;
    },
  } as unknown as JsonLogTail;
  const pumps = Array.from({ length: 8 }, () => recordingPump().pump);
  const pulls = pumps.map((p) => p.pull(tail));
  release();
  await Promise.all(pulls);
  t.equal(seen.size, 8);
  t.same(pumps.map((p) => p.bufferBytes), Array(8).fill(0));
});

t.test("a pump that logs a little keeps buffers of its own size, not slices of Node's shared pool", async (t) => {
  const { pump, written } = recordingPump();
  const tail = chunkedTail([dockerEntry("hello\n")]);
  while ((await pump.pull(tail)).bytes > 0);
  t.match(written.join(""), / stdout F hello\n/);
  // The 16 KiB input and an output 4 KiB longer: on Node 26 a pooled input alone would keep a 64 KiB slab.
  t.ok(pump.bufferBytes > 0 && pump.bufferBytes <= 16 * 1024 + 20 * 1024, `holds ${pump.bufferBytes} bytes`);
});

t.test("buffers made on demand still carry lines whole, across reads and a grown input", async (t) => {
  const { pump, written } = recordingPump();
  const long = "y".repeat(40_000);
  const first = dockerEntry("one\n");
  // The second entry arrives in two reads; the third is longer than the first input buffer.
  const tail = chunkedTail([first + dockerEntry("tw").slice(0, 10), dockerEntry("tw").slice(10) + dockerEntry(`${long}\n`)]);
  while ((await pump.pull(tail)).bytes > 0);
  const text = written.join("");
  t.match(text, / stdout F one\n/, "the first line");
  t.match(text, / stdout P tw\n/, "the line split between reads, once, whole");
  t.equal(text.split(" stdout P tw\n").length, 2, "written once");
  t.ok(text.includes(` stdout F ${long}\n`), "the line longer than the first input buffer");
  t.ok(pump.bufferBytes > 16 * 1024, "the buffers grew for it");
});
