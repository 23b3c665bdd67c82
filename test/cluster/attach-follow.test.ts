// kubectl attach (with stdin, and to a container's output) through the API
// server and kubelet to cridock's streaming server, over WebSocket and over
// SPDY; and kubectl logs -f, which kubelet serves from the CRI log file
// cridock writes (the remote-command transports do not carry it, so it runs
// once). Every wait is bounded; a kubectl that outlives its bound fails the
// test and is killed at teardown.
import t, { type Test } from "tap";
import type { ChildProcess } from "node:child_process";
import { apply, kubectl, kubectlOk, kubectlSpawn, testNamespace, TRANSPORTS, waitFor, waitPodReady } from "./harness/cluster.ts";
import { BUSYBOX_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "attach");

/** A spawned kubectl whose output is collected, and whose exit can be awaited with a bound. */
interface Watched {
  child: ChildProcess;
  output(): string;
  exited(timeoutMs: number): Promise<number | null>;
}

function watch(t: Test, args: string[], env: Record<string, string> = {}): Watched {
  const child = kubectlSpawn(["-n", ns, ...args], env);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  t.teardown(() => void child.kill("SIGKILL"));
  return {
    child,
    output: () => stdout,
    async exited(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`kubectl ${args.join(" ")} still running after ${timeoutMs} ms; stdout: ${stdout} stderr: ${stderr}`)), timeoutMs);
      });
      try {
        return await Promise.race([exit, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Waits until the collected output matches. */
function outputMatches(w: Watched, pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> {
  return waitFor(`kubectl output matching ${pattern}`, async () => pattern.exec(w.output()) ?? undefined, timeoutMs, 100);
}

/**
 * A container that prints a numbered tick twice a second until /tmp/go
 * exists, then prints "finished" and exits 0 (restartPolicy Never): the test
 * decides when it ends, through exec.
 */
function ticker(name: string): object {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "tick",
          image: BUSYBOX_IMAGE,
          command: ["sh", "-c", "i=0; while [ ! -e /tmp/go ]; do echo tick-$i; i=$((i+1)); sleep 0.5; done; echo finished"],
        },
      ],
    },
  };
}

/** The highest tick number in `text`, or -1. */
function lastTick(text: string): number {
  return Math.max(-1, ...[...text.matchAll(/tick-(\d+)/g)].map((m) => Number(m[1])));
}

for (const transport of TRANSPORTS) {
  t.test(`attach over ${transport.name}`, async (t) => {
    const env = transport.env;

    t.test("attach -i: lines written to stdin come back, and closing stdin (stdinOnce) ends the container and kubectl", async (t) => {
      const pod = `echo-${transport.name}`;
      await apply(ns, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: pod },
        spec: {
          restartPolicy: "Never",
          terminationGracePeriodSeconds: 1,
          containers: [
            { name: "echo", image: BUSYBOX_IMAGE, stdin: true, stdinOnce: true, command: ["sh", "-c", 'while read line; do echo "got $line"; done; echo "stdin closed"'] },
          ],
        },
      });
      await waitPodReady(ns, pod);
      const attach = watch(t, ["attach", "-i", pod, "-c", "echo"], env);
      attach.child.stdin!.write("first line\n");
      await outputMatches(attach, /got first line\n/);
      attach.child.stdin!.write("second line\n");
      await outputMatches(attach, /got second line\n/);
      attach.child.stdin!.end();
      t.equal(await attach.exited(60_000), 0, "kubectl attach ends with the container");
      t.equal(attach.output(), "got first line\ngot second line\nstdin closed\n", "exactly the echoed lines, then the container's last words");
      const terminated = await waitFor(`pod ${pod} to terminate`, async () => {
        const status = JSON.parse(await kubectlOk(["-n", ns, "get", "pod", pod, "-o", "json"])).status;
        return status.containerStatuses?.[0]?.state?.terminated;
      }, 60_000);
      t.equal(terminated.exitCode, 0, "the container ended because its stdin closed");
    });

    t.test("attach to a container's output: new lines only, and kubectl ends when the container does", async (t) => {
      const pod = `ticker-${transport.name}`;
      await apply(ns, ticker(pod));
      await waitPodReady(ns, pod);
      // Attach once the log has a few ticks, so output from before the attach exists to be (not) replayed.
      const before = await waitFor(`ticks in the log of ${pod}`, async () => {
        const last = lastTick(await kubectlOk(["-n", ns, "logs", pod]));
        return last >= 2 ? last : undefined;
      }, 30_000, 250);
      const attach = watch(t, ["attach", pod, "-c", "tick"], env);
      // Two ticks seen through the attach: it is connected and streams as they come.
      const first = Number((await outputMatches(attach, /tick-(\d+)\n/))[1]);
      await outputMatches(attach, new RegExp(`tick-${first + 1}\\n`));
      t.ok(first >= before, `attach starts at the live output (first tick ${first}, the log had ${before}), no replay of the log`);
      t.notMatch(attach.output(), /tick-0\n/, "earlier output is not replayed");
      await kubectlOk(["-n", ns, "exec", pod, "--", "touch", "/tmp/go"]);
      t.equal(await attach.exited(60_000), 0, "kubectl attach ends when the container exits");
      t.match(attach.output(), /finished\n$/, "the container's last line arrived before the end");
    });
  });
}

t.test("logs -f follows lines written after it started, and ends when the container ends", async (t) => {
  const pod = "follow";
  await apply(ns, ticker(pod));
  await waitPodReady(ns, pod);
  const follow = watch(t, ["logs", "-f", pod]);
  const atStart = lastTick(await outputMatches(follow, /tick-\d+\n/).then(() => follow.output()));
  await outputMatches(follow, new RegExp(`tick-${atStart + 3}\\n`));
  const complete = follow.output();
  const lines = complete.slice(0, complete.lastIndexOf("\n")).split("\n");
  t.same(lines, lines.map((_, i) => `tick-${i}`), "every line once, in order, from the first (no gap, no duplicate)");
  await kubectlOk(["-n", ns, "exec", pod, "--", "touch", "/tmp/go"]);
  // kubelet checks through CRI whether the container still runs when the file goes quiet (every few seconds).
  t.equal(await follow.exited(60_000), 0, "logs -f ends once the container has exited");
  t.match(follow.output(), /\nfinished\n$/, "the last line arrived before the end");
});

t.test("logs -f ends when kubectl is interrupted, and a new follow starts where the log is", async (t) => {
  const pod = "follow-interrupted";
  await apply(ns, ticker(pod));
  await waitPodReady(ns, pod);
  const first = watch(t, ["logs", "-f", pod]);
  await outputMatches(first, /tick-1\n/);
  first.child.kill("SIGINT");
  t.not(await first.exited(10_000), undefined, "kubectl exits on SIGINT");
  const second = watch(t, ["logs", "-f", "--tail=1", pod]);
  const seen = lastTick(await outputMatches(second, /tick-\d+\n/).then(() => second.output()));
  await outputMatches(second, new RegExp(`tick-${seen + 2}\\n`));
  t.ok(seen >= 1, "the second follow starts at the log's end (--tail=1)");
  await kubectl(["-n", ns, "delete", "pod", pod, "--wait=true", "--timeout=60s"], { timeoutMs: 70_000 });
  t.not(await second.exited(60_000), undefined, "a follow of a deleted pod ends");
});
