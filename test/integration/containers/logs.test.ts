/**
 * CRI log files against a real dockerd: volume and long lines, rotation via
 * ReopenContainerLog, and cridock killed -9 and restarted mid-stream.
 */
import t from "tap";
import { readFile, rename, stat } from "node:fs/promises";
import { parseRecord } from "../../../src/logs/crilog.ts";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { containerConfig, createContainer, leakedContainers, removePod, runPod, settledLog, startHarness, status, waitExited, waitLog } from "./harness.ts";

const h = await startHarness();
t.teardown(() => h.close());
const pod = await runPod(h);

/** Joins P…F records per stream into lines (a last P run is the output's unended line); every line must be a CRI record. */
function criLines(text: string, t: { fail(message: string): void }): string[] {
  const out: string[] = [];
  let partial = "";
  for (const line of text.split("\n").slice(0, -1)) {
    const r = parseRecord(line);
    if (!r) {
      t.fail(`not a CRI record: ${line.slice(0, 80)}`);
      continue;
    }
    partial += r.content;
    if (r.tag === "F") {
      out.push(partial);
      partial = "";
    }
  }
  if (partial !== "") out.push(partial);
  return out;
}


t.test("100,000 lines and a 1 MiB line arrive complete and in order", async (t) => {
  const id = await createContainer(h, pod, containerConfig("volume", ["sh", "-c", "seq 1 100000; head -c 1048576 /dev/zero | tr '\\0' x; echo; echo end"]));
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  const text = await waitLog(s.logPath, (x) => x.endsWith(" stdout F end\n"), 120_000);
  const lines = criLines(text, t);
  t.equal(lines.length, 100_002);
  t.ok(lines.slice(0, 100_000).every((l, i) => l === String(i + 1)), "numbers in order, each once");
  t.equal(lines[100_000], "x".repeat(1048576), "the long line is whole");
  t.ok(text.split("\n").filter((l) => / stdout P /.test(l)).length >= 63, "the long line is split into P records");
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("a TTY container's output is in the CRI file too, stdout only, its unended last line P", async (t) => {
  const id = await createContainer(h, pod, containerConfig("tty", ["sh", "-c", "echo one; echo two >&2; printf three"], { tty: true }));
  await h.client.call("StartContainer", { containerId: id });
  const s = await waitExited(h, id);
  // Unended, so P: kubelet adds no newline the container never wrote.
  const text = await waitLog(s.logPath, (x) => x.includes(" P three\n"));
  const records = text.split("\n").slice(0, -1).map((l) => parseRecord(l));
  t.ok(records.every((r) => r?.stream === "stdout"), "a terminal has one stream");
  // The terminal turns "\n" into "\r\n"; the content keeps the "\r".
  t.same(criLines(text, t), ["one\r", "two\r", "three"]);
  await h.client.call("RemoveContainer", { containerId: id });
});

t.test("ReopenContainerLog rotates: the old file stays, new lines go to a new file", async (t) => {
  const id = await createContainer(h, pod, containerConfig("rotate", ["sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.05; done"]));
  await h.client.call("StartContainer", { containerId: id });
  const path = (await status(h, id)).logPath;
  await waitLog(path, (x) => x.includes(" line 5\n"));
  await rename(path, `${path}.1`);
  await h.client.call("ReopenContainerLog", { containerId: id });
  t.ok(await stat(path), "a new file exists when Reopen returns");
  await waitLog(path, (x) => x.split("\n").length > 5);
  const rotated = await readFile(`${path}.1`, "utf8");
  await new Promise((r) => setTimeout(r, 500));
  t.equal(await readFile(`${path}.1`, "utf8"), rotated, "the rotated file is no longer written");
  await h.client.call("StopContainer", { containerId: id, timeout: 0n });
  const all = [...criLines(rotated, t), ...criLines(await settledLog(path, 100, 200), t)];
  const numbers = all.map((l) => Number(l.split(" ")[1]));
  t.same(numbers, numbers.map((_, i) => i + 1), "no line lost or repeated across the rotation");
  await h.client.call("RemoveContainer", { containerId: id });
  await t.rejects(h.client.call("ReopenContainerLog", { containerId: id }));
});

t.test("cridock killed -9 and restarted: every number exactly once", async (t) => {
  // About 15 s of output (6,000 lines, a millisecond's sleep and a shell
  // round each): cridock is killed after 500 and back long before the end.
  const id = await createContainer(h, pod, containerConfig("numbers", ["sh", "-c", "seq 1 6000 | while read i; do echo $i; usleep 1000; done"]));
  await h.client.call("StartContainer", { containerId: id });
  const path = (await status(h, id)).logPath;
  await waitLog(path, (x) => x.split("\n").length > 500);
  await h.cridock.kill();
  await new Promise((r) => setTimeout(r, 1500));
  const again = await startCridockProcess({ socketPath: h.cridock.socketPath, rootDirectory: h.cridock.rootDirectory, flags: h.cridockFlags });
  t.teardown(() => again.stop());
  const deadline = Date.now() + 180_000;
  let s = (await again.client.call("ContainerStatus", { containerId: id })).status;
  t.equal(s.state, 1, "the container still runs when cridock is back: it follows a log mid-stream");
  do {
    s = (await again.client.call("ContainerStatus", { containerId: id })).status;
    await new Promise((r) => setTimeout(r, 500));
  } while (s.state !== 2 && Date.now() < deadline);
  const text = await waitLog(path, (x) => x.includes(" stdout F 6000\n"), 60_000);
  const numbers = criLines(text, t).map(Number);
  t.equal(numbers.length, 6000);
  t.ok(numbers.every((n, i) => n === i + 1), "each number once, in order");
  await again.client.call("RemoveContainer", { containerId: id });
  await again.client.call("StopPodSandbox", { podSandboxId: pod.podSandboxId });
  await again.client.call("RemovePodSandbox", { podSandboxId: pod.podSandboxId });
  t.same(await leakedContainers(h), []);
});
