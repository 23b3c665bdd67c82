/**
 * A second cridock started on a socket a live instance serves refuses
 * before it touches anything: no recovery of the live instance's sandbox
 * checkpoints, no streaming server, no log writers. (The docker endpoint is
 * a socket nobody serves, so nothing here reaches a real dockerd.)
 */
import t from "tap";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

t.test("a live socket is refused before recovery, streaming or log writers start", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "cridock-second-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, "cri.sock");
  const live = createServer((c) => c.end());
  await new Promise<void>((resolve) => live.listen(socketPath, resolve));
  t.teardown(() => new Promise<void>((resolve) => live.close(() => resolve())));
  // The live instance's RunPodSandbox in progress: recovery would undo it.
  const root = join(dir, "root");
  const id = "e".repeat(64);
  await mkdir(join(root, "sandbox"), { recursive: true });
  const checkpoint = join(root, "sandbox", `${id}.json`);
  await writeFile(checkpoint, JSON.stringify({ id, phase: "creating" }));
  const before = await stat(checkpoint);

  const child = spawn(process.execPath, [
    join(REPO, "bin/cridock.js"),
    `--container-runtime-endpoint=unix://${socketPath}`,
    `--root-directory=${root}`,
    `--docker-endpoint=unix://${join(dir, "no-docker.sock")}`,
    "--network-plugin=no-op",
    "--log-level=debug",
  ], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d));
  child.stderr.on("data", (d: Buffer) => (output += d));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  t.not(code, 0, "the second instance exits with an error");
  t.match(output, /already serving/, "saying another process serves the socket");
  t.notMatch(output, /recovery|streams|log followers/i, "before recovery, the streaming server or log writers ran");
  const after = await stat(checkpoint);
  t.equal(after.mtimeMs, before.mtimeMs, "the live instance's checkpoint is untouched");
  t.same(JSON.parse(await readFile(checkpoint, "utf8")), { id, phase: "creating" });
  t.same((await readdir(root)).sort(), ["sandbox"], "nothing else is created in the root directory");
});
