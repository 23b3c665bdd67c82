/**
 * The Docker client's own use of undici (src/docker/undici-pool.ts imports
 * undici's pool, request, upgrade and error modules directly, not its
 * index), against a fake dockerd on a unix socket: version negotiation, a
 * JSON request with a body, a hijacked connection carrying bytes both ways
 * with the request's body, an upgrade dockerd refuses, a request dockerd
 * does not answer in time, and a socket where nothing listens. What an
 * undici upgrade must keep (its internals moved between 7 and 8).
 */
import t from "tap";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { DockerClient } from "../../src/docker/client.ts";
import { CridockError } from "../../src/errors.ts";
import { createLogger } from "../../src/log.ts";

const dir = await mkdtemp(join(tmpdir(), "cridock-wire-"));
const socketPath = join(dir, "docker.sock");
const seen: { method: string; url: string; body: string }[] = [];

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => resolve(body));
  });
}

const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
  const body = await readBody(req);
  seen.push({ method: req.method!, url: req.url!, body });
  if (req.url === "/version") {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ Version: "29.0.0", ApiVersion: "1.52", MinAPIVersion: "1.24" }));
  } else if (req.url === "/v1.48/containers/create?name=x" && req.method === "POST") {
    res.statusCode = 201;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ Id: "abc", Echo: JSON.parse(body) }));
  } else if (req.url?.startsWith("/v1.48/slow")) {
    // Never answers: the client's deadline must end the request.
  } else {
    res.statusCode = 404;
    res.end("{}");
  }
});
/** Upgraded sockets leave the server's connection tracking (closeAllConnections): closed by hand. */
const upgraded = new Set<Duplex>();
server.on("upgrade", async (req: IncomingMessage, socket: Duplex) => {
  upgraded.add(socket);
  // Node's parser hands the request's body to `req` before the upgrade: as dockerd, read the JSON first.
  const body = await readBody(req);
  seen.push({ method: req.method!, url: req.url!, body });
  if (req.url?.startsWith("/v1.48/exec/refused/start")) {
    const message = JSON.stringify({ message: "No such exec instance: refused" });
    socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${message.length}\r\n\r\n${message}`);
    return;
  }
  socket.write("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
  socket.on("data", (d: Buffer) => socket.write(Buffer.concat([Buffer.from("echo:"), d])));
});
await new Promise<void>((resolve) => server.listen(socketPath, resolve));

const client = new DockerClient({ endpoint: `unix://${socketPath}`, requestTimeoutMs: 2000, logger: createLogger("silent") });
t.teardown(async () => {
  // The never-answered request's connection would hold the server, and the client's pool, open.
  server.closeAllConnections();
  for (const socket of upgraded) socket.destroy();
  await client.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

t.test("a JSON request with a body, on the negotiated API version", async (t) => {
  const answer = await client.json<{ Id: string; Echo: unknown }>("POST", "/containers/create", { query: { name: "x" }, body: { Image: "busybox" } });
  t.same(answer, { Id: "abc", Echo: { Image: "busybox" } });
  t.equal(seen[0]!.url, "/version", "the version was negotiated first");
  t.equal(seen.at(-1)!.body, JSON.stringify({ Image: "busybox" }));
});

t.test("a hijacked connection carries the request's body, then bytes both ways", async (t) => {
  const socket = await client.hijack("/exec/e1/start", { body: { Detach: false, Tty: false } });
  const hijack = seen.find((s) => s.url === "/v1.48/exec/e1/start")!;
  t.equal(hijack.method, "POST");
  t.same(JSON.parse(hijack.body), { Detach: false, Tty: false });
  const echoed = new Promise<string>((resolve) => socket.once("data", (d: Buffer) => resolve(d.toString())));
  socket.write("ping");
  t.equal(await echoed, "echo:ping");
  socket.destroy();
});

t.test("an upgrade dockerd refuses is an error that names the call", async (t) => {
  const err = await client.hijack("/exec/refused/start", { body: {} }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, CridockError);
  t.match((err as Error).message, /docker POST \/exec\/refused\/start \(hijack\)/);
  t.not((err as CridockError).code, "DEADLINE_EXCEEDED", "refused at once, not timed out");
});

t.test("a request dockerd does not answer ends at the deadline", async (t) => {
  const err = await client.json("GET", "/slow", { timeoutMs: 300 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, CridockError);
  t.equal((err as CridockError).code, "DEADLINE_EXCEEDED");
});

t.test("a socket where nothing listens is UNAVAILABLE", async (t) => {
  const absent = new DockerClient({ endpoint: `unix://${join(dir, "absent.sock")}`, requestTimeoutMs: 2000, logger: createLogger("silent") });
  t.teardown(() => absent.close());
  const err = await absent.json("GET", "/version", { unversioned: true }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, CridockError);
  t.equal((err as CridockError).code, "UNAVAILABLE");
});
