/**
 * Half-open connections to the streaming server (a partial request head,
 * then silence) are closed after the header timeout, at most a capped
 * number wait at once, and the cap being hit is logged.
 */
import t from "tap";
import { connect, type Socket } from "node:net";
import { PassThrough } from "node:stream";
import { StreamingServer } from "../../src/streaming/server.ts";
import { createLogger } from "../../src/log.ts";
import type { RemoteCommandRuntime } from "../../src/streaming/remotecommand.ts";
import type { PortForwardRuntime } from "../../src/streaming/portforward.ts";

t.test("partial request heads are cut off after the header timeout; the cap refuses the excess and is logged", async (t) => {
  const logs = new PassThrough();
  let logged = "";
  logs.on("data", (d: Buffer) => (logged += d));
  const server = new StreamingServer({
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("warn", logs),
    commands: {} as RemoteCommandRuntime,
    portForwards: {} as PortForwardRuntime,
    headerTimeoutMs: 800,
    maxPendingConnections: 50,
  });
  await server.start();
  t.teardown(() => server.stop());
  const port = Number(new URL(server.baseUrl).port);
  const open = new Set<Socket>();
  await Promise.all(
    Array.from({ length: 200 }, () =>
      new Promise<void>((resolve) => {
        const s = connect(port, "127.0.0.1", () => {
          s.write("GET /exec/abc HTTP/1.1\r\nHost: x\r\n");
          resolve();
        });
        open.add(s);
        s.on("error", () => undefined);
        s.on("close", () => open.delete(s));
        s.on("error", () => resolve());
      }),
    ),
  );
  await new Promise((r) => setTimeout(r, 300));
  t.ok(open.size <= 50, `at most 50 half-open connections are held (${open.size})`);
  t.match(logged, /too many streaming connections/, "hitting the cap is logged");
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(open.size, 0, "every half-open connection is closed after the header timeout");
  for (const s of open) s.destroy();
  const answer = await new Promise<string>((resolve) => {
    const s = connect(port, "127.0.0.1", () => s.write("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    let text = "";
    s.on("data", (d: Buffer) => (text += d));
    s.on("close", () => resolve(text));
  });
  t.match(answer, /^HTTP\/1.1 404/, "a whole request is still answered");
});
