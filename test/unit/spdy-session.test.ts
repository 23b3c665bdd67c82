import t from "tap";
import pino from "pino";
import { SpdySession, type SpdyStream } from "../../src/streaming/spdy.ts";
import { FLAG_FIN, GoAwayStatus, encodeData, encodePing, encodeRstStream, encodeSettings, encodeWindowUpdate } from "../../src/streaming/spdy-frames.ts";
import { SpdyTestClient, duplexPair } from "../helpers/spdy-client.ts";

const log = pino({ level: "silent" });

function setup(t: { teardown(fn: () => void): void }, onStream: (s: SpdyStream) => void = () => undefined) {
  const [serverEnd, clientEnd] = duplexPair();
  const session = new SpdySession(serverEnd, { log, onStream, maxConcurrentStreams: 2 });
  const client = new SpdyTestClient(clientEnd);
  t.teardown(() => {
    client.close();
    session.destroy();
  });
  return { session, client };
}

t.test("a new stream gets a SYN_REPLY and its headers reach the handler", async (t) => {
  const streams: SpdyStream[] = [];
  const { client } = setup(t, (s) => streams.push(s));
  const id = await client.open({ streamtype: "stdout" });
  await client.waitFor((f) => f.some((x) => x.kind === "syn_reply"));
  const reply = client.frames.find((f) => f.kind === "syn_reply")!;
  t.equal(reply.kind === "syn_reply" && reply.streamId, id);
  t.same(reply.headers, {}, "empty reply headers");
  t.equal(streams.length, 1);
  t.equal(streams[0]!.headers.streamtype, "stdout");
});

t.test("data both ways, FIN both ways", async (t) => {
  const got: Buffer[] = [];
  let ended = false;
  const { client } = setup(t, (s) => {
    s.on("data", (d: Buffer) => got.push(d));
    s.on("end", () => {
      ended = true;
      s.end("bye");
    });
    s.write("hello ");
  });
  const id = await client.open({ streamtype: "stdin" });
  client.send(id, "abc");
  client.send(id, "def", true);
  await client.waitFor(() => client.received(id).fin);
  t.equal(Buffer.concat(got).toString(), "abcdef");
  t.ok(ended, "the peer's FIN ends the readable side");
  t.equal(client.received(id).data.toString(), "hello bye", "end() sends the rest with FIN");
});

t.test("large writes are split into frames of at most 64 KiB", async (t) => {
  const payload = Buffer.alloc(200_000, 7);
  const { client } = setup(t, (s) => s.end(payload));
  const id = await client.open({ streamtype: "stdout" });
  await client.waitFor(() => client.received(id).fin);
  const sizes = client.frames.filter((f) => f.kind === "data").map((f) => (f.kind === "data" ? f.data.length : 0));
  t.ok(sizes.every((n) => n <= 65536), `frame sizes ${sizes}`);
  t.ok(client.received(id).data.equals(payload));
});

t.test("pings from the client are echoed; echoes of server pings are not", async (t) => {
  const { client } = setup(t);
  client.raw(encodePing(3));
  client.raw(encodePing(4));
  client.raw(encodePing(5));
  await client.waitFor((f) => f.filter((x) => x.kind === "ping").length >= 2);
  await new Promise((r) => setTimeout(r, 50));
  t.same(client.frames.filter((f) => f.kind === "ping").map((f) => (f.kind === "ping" ? f.id : 0)), [3, 5]);
});

t.test("RST_STREAM from the client destroys the stream", async (t) => {
  let stream: SpdyStream | undefined;
  const { client, session } = setup(t, (s) => (stream = s));
  const id = await client.open({ streamtype: "data" });
  await client.waitFor(() => stream !== undefined);
  const closed = new Promise((resolve) => stream!.once("close", resolve));
  client.raw(encodeRstStream(id, 5));
  await closed;
  t.ok(stream!.resetByPeer);
  t.equal(session.openStreams, 0);
});

t.test("streams past the concurrency limit are refused", async (t) => {
  const { client } = setup(t);
  await client.open({ a: "1" });
  await client.open({ a: "2" });
  const third = await client.open({ a: "3" });
  await client.waitFor((f) => f.some((x) => x.kind === "rst_stream"));
  t.match(client.frames.find((f) => f.kind === "rst_stream"), { streamId: third, status: 3 });
});

t.test("garbage closes the session with GOAWAY(PROTOCOL_ERROR)", async (t) => {
  const { client, session } = setup(t);
  client.raw(Buffer.from([0x80, 9, 0, 1, 0, 0, 0, 0])); // SPDY version 9
  await client.waitClosed();
  t.ok(session.isClosed);
  t.match(client.frames.find((f) => f.kind === "goaway"), { status: GoAwayStatus.PROTOCOL_ERROR });
});

t.test("stream ids must be new and odd", async (t) => {
  const { client, session } = setup(t);
  await client.open({ a: "1" });
  // Re-send a SYN_STREAM for id 1 by hand: reuse is a protocol error.
  (client as unknown as { nextId: number }).nextId = 1;
  await client.open({ a: "again" });
  await client.waitClosed();
  t.ok(session.isClosed);
});

t.test("data after FIN is answered with RST_STREAM(STREAM_ALREADY_CLOSED)", async (t) => {
  const { client } = setup(t, (s) => s.resume());
  const id = await client.open({ a: "1" });
  client.send(id, "x", true);
  client.raw(encodeData(id, Buffer.from("late")));
  await client.waitFor((f) => f.some((x) => x.kind === "rst_stream"));
  t.match(client.frames.find((f) => f.kind === "rst_stream"), { streamId: id, status: 9 });
});

t.test("flow control is honoured once the peer uses it", async (t) => {
  const { client } = setup(t, (s) => s.end(Buffer.alloc(25, 1)));
  client.raw(encodeSettings([{ id: 7, value: 10 }]));
  const id = await client.open({ a: "1" });
  await client.waitFor(() => client.received(id).data.length >= 10);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(client.received(id).data.length, 10, "stops at the 10-byte window");
  client.raw(encodeWindowUpdate(id, 100));
  await client.waitFor(() => client.received(id).fin);
  t.equal(client.received(id).data.length, 25);
});

t.test("without SETTINGS or WINDOW_UPDATE from the peer, no window applies (spdystream)", async (t) => {
  const { client } = setup(t, (s) => s.end(Buffer.alloc(300_000, 1)));
  const id = await client.open({ a: "1" });
  await client.waitFor(() => client.received(id).fin);
  t.equal(client.received(id).data.length, 300_000);
  t.notOk(client.frames.some((f) => f.kind === "window_update"), "no WINDOW_UPDATE sent to a peer that ignores them");
});

t.test("goAway lets queued frames out, then closes once streams finish", async (t) => {
  let stream: SpdyStream | undefined;
  const { client, session } = setup(t, (s) => {
    stream = s;
    s.resume();
  });
  const id = await client.open({ a: "1" });
  await client.waitFor(() => stream !== undefined);
  stream!.end("last words");
  await new Promise((r) => stream!.once("finish", r));
  session.goAway();
  client.send(id, "", true);
  await client.waitClosed();
  t.equal(client.received(id).data.toString(), "last words");
  t.ok(client.frames.some((f) => f.kind === "goaway"));
  t.ok(client.received(id).fin);
  t.same(FLAG_FIN, 1);
});

t.test("a SYN_STREAM and its first data in one write (as kubelet's proxy delivers them)", async (t) => {
  const { HeaderCompressor } = await import("../../src/streaming/spdy-zlib.ts");
  const { encodeHeaderBlock, encodeSynStream } = await import("../../src/streaming/spdy-frames.ts");
  const got: Buffer[] = [];
  const { client, session } = setup(t, (s) => s.on("data", (d: Buffer) => got.push(d)));
  const compressor = new HeaderCompressor();
  t.teardown(() => compressor.close());
  const block = await compressor.compress(encodeHeaderBlock({ streamtype: "data", port: "80" }));
  client.raw(Buffer.concat([encodeSynStream(1, block, 0), encodeData(1, Buffer.from("GET / HTTP/1.0\r\n\r\n"), 0)]));
  await client.waitFor(() => Buffer.concat(got).length > 0);
  t.equal(Buffer.concat(got).toString(), "GET / HTTP/1.0\r\n\r\n", "the data reaches the stream");
  t.notOk(session.isClosed, "the session is not ended as a protocol error");
});
