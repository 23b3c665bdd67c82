import t from "tap";
import pino from "pino";
import { PassThrough, type Duplex } from "node:stream";
import { TokenStore } from "../../src/streaming/tokens.ts";
import {
  SpdyRemoteCommand,
  expectedChannels,
  protocolVersion,
  resizeEvents,
  statusMessage,
  type RemoteCommandRequest,
  type RemoteCommandRuntime,
} from "../../src/streaming/remotecommand.ts";
import { SpdyPortForward, parsePort, type PortForwardRuntime } from "../../src/streaming/portforward.ts";
import { SpdySession } from "../../src/streaming/spdy.ts";
import type { StreamIO } from "../../src/runtime/exec/manager.ts";
import { SpdyTestClient, duplexPair } from "../helpers/spdy-client.ts";

const log = pino({ level: "silent" });

t.test("tokens are random, single-use, short-lived and bounded", async (t) => {
  let now = 1000;
  const store = new TokenStore<string>({ ttlMs: 100, maxEntries: 3, now: () => now });
  const a = store.issue("a");
  t.match(a, /^[A-Za-z0-9_-]{32}$/, "192 bits, base64url");
  t.not(store.issue("b"), a);
  t.equal(store.redeem(a), "a");
  t.equal(store.redeem(a), undefined, "a token redeems once");
  t.equal(store.redeem("nope"), undefined);
  t.equal(store.redeem("../../etc/passwd"), undefined);
  const c = store.issue("c");
  now += 101;
  t.equal(store.redeem(c), undefined, "expired");
  const kept = [store.issue("1"), store.issue("2"), store.issue("3"), store.issue("4")];
  t.equal(store.size, 3, "the oldest is dropped past maxEntries");
  t.equal(store.redeem(kept[0]!), undefined);
  t.equal(store.redeem(kept[3]!), "4");
});

const exec = (over: Partial<RemoteCommandRequest> = {}): RemoteCommandRequest => ({
  kind: "exec",
  containerId: "abc",
  cmd: ["sh", "-c", "exit 3"],
  tty: false,
  stdin: false,
  stdout: true,
  stderr: true,
  ...over,
});

t.test("protocol versions and expected channels", async (t) => {
  t.equal(protocolVersion("v4.channel.k8s.io"), 4);
  t.equal(protocolVersion("channel.k8s.io"), 1);
  t.same([...expectedChannels(exec(), 4)].sort(), ["error", "stderr", "stdout"]);
  t.same([...expectedChannels(exec({ tty: true, stdin: true }), 4)].sort(), ["error", "resize", "stdin", "stdout"], "tty: no stderr, a resize channel");
  t.same([...expectedChannels(exec({ tty: true, stdin: true }), 2)].sort(), ["error", "stdin", "stdout"], "v2 has no resize channel");
});

t.test("status documents", async (t) => {
  t.same(JSON.parse(statusMessage(4, exec(), { exitCode: 0 })!.toString()), { metadata: {}, status: "Success" });
  const failed = JSON.parse(statusMessage(4, exec(), { exitCode: 3 })!.toString());
  t.equal(failed.status, "Failure");
  t.equal(failed.reason, "NonZeroExitCode");
  t.same(failed.details.causes, [{ reason: "ExitCode", message: "3" }]);
  const broken = JSON.parse(statusMessage(4, exec(), { error: new Error("container gone") })!.toString());
  t.equal(broken.reason, "InternalError");
  t.match(broken.message, /container gone/);
  t.equal(statusMessage(2, exec(), { exitCode: 0 }), undefined, "v2: nothing on success");
  t.match(statusMessage(2, exec(), { exitCode: 3 })!.toString(), /non-zero exit code.*exit code 3/);
});

t.test("resize events from Go's json.Encoder output, split anywhere", async (t) => {
  const source = new PassThrough();
  const text = '{"Width":80,"Height":24}\n{"Width":1' + "2" + '0,"Height":40}\n{"Width":"x"}\nnot json {"Width":7,"Height":0}\n';
  for (let i = 0; i < text.length; i += 5) source.write(text.slice(i, i + 5));
  source.end();
  const sizes = [];
  for await (const s of resizeEvents(source)) sizes.push(s);
  t.same(sizes, [
    { width: 80, height: 24 },
    { width: 120, height: 40 },
    { width: 7, height: 0 },
  ]);
});

/** A runtime that writes fixed output and echoes stdin. */
function fakeRuntime(exitCode: number): RemoteCommandRuntime & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async exec(_id: string, cmd: string[], io: StreamIO) {
      calls.push(cmd.join(" "));
      io.stdout?.write("out:");
      io.stderr?.write("err!");
      // iterator({ destroyOnReturn: false }): a plain for-await would destroy (reset) the stream at its end.
      if (io.stdin) for await (const chunk of io.stdin.iterator({ destroyOnReturn: false })) io.stdout?.write(chunk);
      return exitCode;
    },
    async attach() {
      calls.push("attach");
    },
  };
}

function spdyPair(t: { teardown(fn: () => void): void }, onStream: ConstructorParameters<typeof SpdySession>[1]["onStream"]) {
  const [serverEnd, clientEnd] = duplexPair();
  const session = new SpdySession(serverEnd, { log, onStream });
  const client = new SpdyTestClient(clientEnd);
  t.teardown(() => (client.close(), session.destroy()));
  return { session, client };
}

t.test("remote command over SPDY: streams, output, stdin half-close, v4 status, goodbye", async (t) => {
  const runtime = fakeRuntime(3);
  let handler: SpdyRemoteCommand | undefined;
  handler = new SpdyRemoteCommand(runtime, exec({ stdin: true }), 4, log, 5000);
  const { session, client } = spdyPair(t, (s) => handler!.onStream(s));
  handler.attach(session);
  const error = await client.open({ streamtype: "error" });
  const stdin = await client.open({ streamtype: "stdin" });
  const stdout = await client.open({ streamtype: "stdout" });
  const stderr = await client.open({ streamtype: "stderr" });
  client.send(stdin, "typed", true);
  await client.waitFor((f) => f.some((x) => x.kind === "goaway"));
  t.equal(client.received(stdout).data.toString(), "out:typed");
  t.ok(client.received(stdout).fin);
  t.equal(client.received(stderr).data.toString(), "err!");
  t.equal(JSON.parse(client.received(error).data.toString()).details.causes[0].message, "3");
  t.ok(client.received(error).fin);
  t.ok(client.received(stdin).fin, "the server half-closes stdin too (clients wait for it)");
});

t.test("remote command: a stream of unknown type is refused, missing streams time out", async (t) => {
  const runtime = fakeRuntime(0);
  const handler = new SpdyRemoteCommand(runtime, exec(), 4, log, 200);
  const { session, client } = spdyPair(t, (s) => handler.onStream(s));
  handler.attach(session);
  await client.open({ streamtype: "bogus" });
  await client.open({ streamtype: "error" });
  await client.waitFor((f) => f.some((x) => x.kind === "rst_stream"));
  await client.waitClosed();
  t.same(runtime.calls, [], "the command never ran");
});

t.test("port-forward pairs streams by request id and reports dial errors", async (t) => {
  const forwarded: number[] = [];
  const runtime: PortForwardRuntime = {
    async forward(_sandbox: string, port: number, stream: Duplex) {
      forwarded.push(port);
      if (port === 81) throw new Error("connection refused");
      for await (const chunk of stream.iterator({ destroyOnReturn: false })) stream.write(Buffer.from(String(chunk).toUpperCase()));
    },
  };
  const handler = new SpdyPortForward(runtime, { kind: "portforward", sandboxId: "s", ports: [] }, log, 5000);
  const { client } = spdyPair(t, handler.onStream);
  t.teardown(() => handler.close());
  const err0 = await client.open({ streamtype: "error", port: "80", requestid: "0" }, true);
  const data0 = await client.open({ streamtype: "data", port: "80", requestid: "0" });
  client.send(data0, "ping", true);
  await client.waitFor(() => client.received(err0).fin && client.received(data0).fin);
  t.equal(client.received(data0).data.toString(), "PING");
  t.equal(client.received(err0).data.length, 0, "no error");

  const err1 = await client.open({ streamtype: "error", port: "81", requestid: "1" }, true);
  const data1 = await client.open({ streamtype: "data", port: "81", requestid: "1" });
  await client.waitFor(() => client.received(err1).fin);
  t.match(client.received(err1).data.toString(), /connection refused/);
  t.ok(client.received(data1).fin || client.frames.some((f) => f.kind === "rst_stream" && f.streamId === data1));

  const bad = await client.open({ streamtype: "error", port: "99999", requestid: "2" }, true);
  await client.waitFor(() => client.received(bad).fin);
  t.match(client.received(bad).data.toString(), /invalid port/);
  t.same(forwarded, [80, 81]);
  t.equal(parsePort("0"), undefined);
  t.equal(parsePort("65535"), 65535);
  t.equal(parsePort("8o"), undefined);
});

t.test("port-forward: an incomplete pair is reset after the timeout", async (t) => {
  const handler = new SpdyPortForward({ forward: async () => undefined }, { kind: "portforward", sandboxId: "s", ports: [] }, log, 100);
  const { client } = spdyPair(t, handler.onStream);
  t.teardown(() => handler.close());
  const lone = await client.open({ streamtype: "error", port: "80", requestid: "7" }, true);
  await client.waitFor((f) => f.some((x) => x.kind === "rst_stream" && x.streamId === lone));
  t.pass("reset");
});
