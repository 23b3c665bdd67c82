/**
 * A json-file follower on a container directory laid out as dockerd lays it
 * out, with a fake Docker that answers only the inspect the follower makes:
 * the unit tests of log following drive Docker's log file by hand.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DockerClient } from "../../src/docker/client.ts";
import { parseRecord } from "../../src/logs/crilog.ts";
import { JsonFileFollower } from "../../src/logs/file-follower.ts";
import { FollowStateStore } from "../../src/logs/resume.ts";
import { createLogger } from "../../src/log.ts";

export const silentLog = createLogger("silent" as never);

/** One line of Docker's json-file log. */
export function dockerEntry(text: string): string {
  return `${JSON.stringify({ log: text, stream: "stdout", time: "2026-01-02T03:04:05.1234Z" })}\n`;
}

/** The contents of the CRI file's records; a line that is no record shows as `?<line>`. */
export async function criContents(path: string): Promise<string[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .slice(0, -1)
    .map((l) => parseRecord(l)?.content ?? `?${l}`);
}

/** Waits for `check`; how long it took, or an error naming `what` after `ms`. */
export async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - start;
}

export interface FollowerFixtureOptions {
  /** Docker's log before the follower starts. */
  initialLog?: string;
  /** The container's process as inspect reports it (visible in /proc, as a container's is). */
  pid?: number;
  safetyPollMs?: { first: number; max: number };
  /** The checkpoint store, made on the fixture's state directory. */
  store?: (dir: string) => FollowStateStore;
}

export interface FollowerFixture<S extends FollowStateStore> {
  dir: string;
  /** Docker's json-file log. */
  dockerLog: string;
  criPath: string;
  /** What inspect reports; tests flip `running`. */
  state: { running: boolean; inspects: number };
  store: S;
  follower: JsonFileFollower;
}

/** Sets up (not starts) a follower; everything is removed and stopped at the test's end. */
export async function followerFixture<S extends FollowStateStore = FollowStateStore>(
  t: { teardown(fn: () => unknown): void },
  options: FollowerFixtureOptions = {},
): Promise<FollowerFixture<S>> {
  const dir = await mkdtemp(join(tmpdir(), "cridock-follow-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dockerLog = join(dir, "c-json.log");
  await writeFile(dockerLog, options.initialLog ?? "");
  const pid = options.pid ?? process.pid;
  const state = { running: true, inspects: 0 };
  const docker = {
    inspectContainer: async () => {
      state.inspects++;
      return {
        LogPath: dockerLog,
        HostConfig: { LogConfig: { Type: "json-file", Config: { "max-file": "3" } } },
        State: { Running: state.running, Pid: state.running ? pid : 0 },
      };
    },
  } as unknown as DockerClient;
  // The CRI file lives elsewhere, as kubelet's pod log directory does: its writes in Docker's directory would wake the follower.
  const criDir = await mkdtemp(join(tmpdir(), "cridock-follow-cri-"));
  t.teardown(() => rm(criDir, { recursive: true, force: true }));
  const criPath = join(criDir, "cri.log");
  const stateDir = join(dir, "state");
  const store = (options.store?.(stateDir) ?? new FollowStateStore(stateDir)) as S;
  const follower = new JsonFileFollower({
    docker,
    store,
    logger: silentLog,
    containerId: "c".repeat(64),
    logPath: criPath,
    tty: false,
    safetyPollMs: options.safetyPollMs,
  });
  t.teardown(() => follower.stop());
  return { dir, dockerLog, criPath, state, store, follower };
}
