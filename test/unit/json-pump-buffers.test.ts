/**
 * A json-file follower's pump (src/logs/json-pump.ts) holds only its first
 * read buffer while the container prints nothing: the conversion's buffer
 * comes with the first output. Every followed container has a pump, and a
 * node's containers are mostly silent.
 */
import t from "tap";
import { JsonLogPump } from "../../src/logs/json-pump.ts";
import type { JsonLogTail } from "../../src/logs/json-tail.ts";
import { createLogger } from "../../src/log.ts";

/** A tail over fixed bytes of Docker's json log: each read hands over what is left. */
function fakeTail(text: string): JsonLogTail {
  let left = Buffer.from(text);
  return {
    async read(into: Buffer, at: number): Promise<number> {
      const n = left.copy(into, at, 0, Math.min(left.length, into.length - at));
      left = left.subarray(n);
      return n;
    },
  } as unknown as JsonLogTail;
}

t.test("a silent container's pump holds its read buffer only; the first output brings the conversion's", async (t) => {
  const written: string[] = [];
  const pump = new JsonLogPump({ sink: async (records) => void written.push(records.toString()), logger: createLogger("error") });
  pump.restart("docker.log", 0);
  const quiet = await pump.pull(fakeTail(""));
  t.equal(quiet.bytes, 0);
  t.equal(pump.heldBytes, 16 * 1024, "no output yet: the 16 KiB read buffer only");
  const line = `${JSON.stringify({ log: "hello\n", stream: "stdout", time: "2026-01-02T03:04:05.123456789Z" })}\n`;
  const pulled = await pump.pull(fakeTail(line));
  t.equal(pulled.bytes, line.length);
  t.same(written, ["2026-01-02T03:04:05.123456789Z stdout F hello\n"], "the line converted into a CRI record");
  t.ok(pump.heldBytes > 16 * 1024, "the conversion's buffer exists once output came");
});
