/**
 * What systemd does for a Type=notify service behind a socket unit, played
 * by its own small tools so tests run where systemd is not PID 1:
 * - `systemd-socket-activate -l PATH` listens on PATH and, on the first
 *   connection, execs cridock with the listening socket as fd 3 and
 *   LISTEN_FDS=1, LISTEN_PID=<its pid> (exactly what cridock.socket does);
 * - a `socat UNIX-RECV` listener is the NOTIFY_SOCKET and records every
 *   datagram cridock sends (sd_notify's wire format).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { access, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Test } from "tap";
import { CriClient } from "./cri-client.ts";
import { REPO_ROOT } from "./cridock-process.ts";

export interface NotifyListener {
  path: string;
  /** Every datagram received so far, concatenated. */
  received(): Promise<string>;
  /** Waits until the received text contains `needle`. */
  waitFor(needle: string, timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
}

export async function startNotifyListener(dir: string): Promise<NotifyListener> {
  const path = join(dir, "notify.sock");
  const out = join(dir, "notify.out");
  // Each datagram is appended to the file as it arrives.
  const socat = spawn("sh", ["-c", `exec socat -u UNIX-RECV:${path} OPEN:${out},creat,append`], { stdio: "ignore" });
  await waitUntil(() => access(path).then(() => true, () => false), 10_000, `socat did not create ${path}`);
  const received = () => readFile(out, "utf8").catch(() => "");
  return {
    path,
    received,
    async waitFor(needle, timeoutMs = 30_000) {
      await waitUntil(async () => (await received()).includes(needle), timeoutMs, `no ${needle} arrived on ${path}`);
      return received();
    },
    close: () => stop(socat),
  };
}

export interface ActivatedCridock {
  /** The activator, which execs cridock in place: its pid is cridock's. */
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/** systemd-socket-activate listening on `socketPath`, starting cridock (fd://) on the first connection. */
export function socketActivate(socketPath: string, runtime: "node" | "deno", flags: string[], env: Record<string, string>): ActivatedCridock {
  const cridock =
    runtime === "deno"
      ? [join(REPO_ROOT, "node_modules/.bin/deno"), "run", "-A", join(REPO_ROOT, "src/main.ts")]
      : [process.execPath, join(REPO_ROOT, "bin/cridock.js")];
  const envArgs = Object.entries({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", ...env }).flatMap(([k, v]) => ["-E", `${k}=${v}`]);
  const child = spawn("systemd-socket-activate", ["-l", socketPath, ...envArgs, ...cridock, "--container-runtime-endpoint=fd://", ...flags], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

export async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await done;
}

/**
 * The whole socket-unit story on one runtime: nothing notified before the
 * first connection, that queued call answered on the inherited socket,
 * READY=1, SIGTERM → STOPPING=1 and exit 0 in the grace period, systemd's
 * socket file left alone.
 */
export async function activationScenario(t: Test, runtime: "node" | "deno"): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-activate-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const notify = await startNotifyListener(dir);
  t.teardown(() => notify.close());
  const socketPath = join(dir, "cridock.sock");
  const cridock = socketActivate(socketPath, runtime, [`--root-directory=${join(dir, "root")}`, "--network-plugin=no-op", "--shutdown-grace-period=5s"], {
    NOTIFY_SOCKET: notify.path,
  });
  t.teardown(() => {
    if (cridock.child.exitCode === null) cridock.child.kill("SIGKILL");
  });
  // systemd-socket-activate listens at once; cridock starts on the first connection.
  for (let i = 0; i < 100 && !(await stat(socketPath).catch(() => undefined)); i++) await new Promise((r) => setTimeout(r, 50));
  t.equal(await notify.received(), "", "nothing notified before the first connection");

  const client = new CriClient(socketPath);
  t.teardown(() => client.close());
  const started = Date.now();
  const version = await client.call("Version", { version: "v1" }, { timeoutMs: 120_000 });
  t.equal(version.runtimeApiVersion, "v1", `the queued call was answered on the inherited socket (${Date.now() - started} ms)`);
  const ready = await notify.waitFor("READY=1");
  t.match(ready, /STATUS=serving CRI on fd:\/\//, "READY=1 with a status line");
  t.match(ready, /EXTEND_TIMEOUT_USEC=120000000[\s\S]*READY=1/, "before it, once its modules were loaded, the rest of the start asked for a budget of its own");
  t.match(cridock.output(), /serving CRI on the socket systemd passed/);

  const sandboxes = await client.call("ListPodSandbox", {});
  t.ok(Array.isArray(sandboxes.items), "further calls are served");

  const stopAt = Date.now();
  cridock.child.kill("SIGTERM");
  const code = await cridock.exited;
  t.equal(code, 0, "SIGTERM: exit 0");
  t.ok(Date.now() - stopAt < 10_000, `stopped within the grace period (${Date.now() - stopAt} ms)`);
  t.match(await notify.waitFor("STOPPING=1"), /STOPPING=1/, "STOPPING=1 was sent");
  t.ok((await stat(socketPath)).isSocket(), "the socket file (systemd's) is left in place");
}

