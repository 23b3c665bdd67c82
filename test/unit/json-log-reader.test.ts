/**
 * The json-file reader: Docker's json-file lines → CRI records, tailing
 * across Docker's rotations, and resuming after a restart, against files laid
 * out the way dockerd's json-file driver writes and rotates them.
 */
import t from "tap";
import { appendFile, mkdtemp, readFile, rename, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonLogConverter, type ConvertOptions } from "../../src/logs/json-log.ts";
import { JsonLogTail } from "../../src/logs/json-tail.ts";
import { JsonFileFollower } from "../../src/logs/file-follower.ts";
import { FollowStateStore } from "../../src/logs/resume.ts";
import { parseRecord } from "../../src/logs/crilog.ts";
import type { DockerClient } from "../../src/docker/client.ts";
import { createLogger } from "../../src/log.ts";

const log = createLogger("silent" as never);

/** One json-file line as dockerd writes it (Go trims trailing zeros of the fraction). */
function entry(log: string, stream = "stdout", time = "2026-01-02T03:04:05.1234Z"): string {
  return `${JSON.stringify({ log, stream, time })}\n`;
}

function convertAll(text: string, options: ConvertOptions = { more: false }, skip = 0) {
  const input = Buffer.from(text);
  const out = Buffer.alloc(input.length + 1024);
  const converter = new JsonLogConverter(skip);
  const r = converter.convert(input, 0, input.length, out, 0, options);
  return { ...r, text: out.toString("utf8", 0, r.written) };
}

t.test("entries become CRI records: newline decides F or P, time padded to nine digits", async (t) => {
  const r = convertAll(entry("hello\n") + entry("cut at 16 KiB", "stderr", "2026-01-02T03:04:05Z") + entry("rest\n", "stderr", "2026-01-02T03:04:05.123456789Z"));
  t.equal(
    r.text,
    "2026-01-02T03:04:05.123400000Z stdout F hello\n" +
      "2026-01-02T03:04:05.000000000Z stderr P cut at 16 KiB\n" +
      "2026-01-02T03:04:05.123456789Z stderr F rest\n",
  );
  t.equal(r.records, 3);
  t.equal(r.lastTime, "2026-01-02T03:04:05.123456789Z");
});

t.test("content of every length around the short-copy cut, plain and with escapes, and zone offsets, is copied exactly", async (t) => {
  // Short runs are copied byte by byte, long ones with TypedArray.set (json-log.ts copyBytes).
  const lengths = [0, 1, 2, 31, 32, 33, 63, 64, 65, 66, 127, 128, 129, 1000, 16 * 1024];
  const contents = lengths.flatMap((n) => {
    const plain = "abcdefghij".repeat(Math.ceil(n / 10) + 1).slice(0, n);
    // An escape right after a short or long plain run, then more plain bytes.
    return [plain, `${plain}"${plain}`, `é${plain}\\t${plain}`];
  });
  const times = ["2026-01-02T03:04:05.1234Z", "2026-01-02T03:04:05+02:00", "2026-01-02T03:04:05.123456789-07:30"];
  const text = contents.map((c, i) => entry(`${c}\n`, i % 2 ? "stderr" : "stdout", times[i % times.length])).join("");
  const r = convertAll(text);
  t.equal(r.records, contents.length);
  const records = r.text.split("\n").slice(0, -1).map((l) => parseRecord(l));
  t.same(records.map((rec) => rec?.content), contents, "every content byte for byte");
  t.same(records.map((rec) => rec?.stream), contents.map((_, i) => (i % 2 ? "stderr" : "stdout")));
  t.same(
    records.map((rec) => rec?.timestamp),
    contents.map((_, i) => ["2026-01-02T03:04:05.123400000Z", "2026-01-02T03:04:05.000000000+02:00", "2026-01-02T03:04:05.123456789-07:30"][i % 3]),
    "times padded to nine digits, zone kept",
  );
});

t.test("escapes decode to the bytes the container wrote", async (t) => {
  // Docker's encoder escapes <, >, & and control bytes as \u00XX; UTF-8 stays raw.
  const line = '{"log":"a\\"b\\\\c\\u0009\\u0001\\u003c\\u003e\\u0026é😀\\ud83d\\ude00\\/\\r\\n","stream":"stdout","time":"2026-01-02T03:04:05.5Z"}\n';
  const r = convertAll(line);
  const record = parseRecord(r.text.slice(0, -1));
  t.equal(record?.content, 'a"b\\c\t\u0001<>&é😀😀/\r');
  t.equal(record?.tag, "F");
  // A line whose content ends in an escaped backslash before "n" is not a newline.
  const tricky = convertAll('{"log":"x\\\\n","stream":"stdout","time":"2026-01-02T03:04:05.5Z"}\n');
  t.equal(parseRecord(tricky.text.slice(0, -1))?.content, "x\\n");
  t.equal(parseRecord(tricky.text.slice(0, -1))?.tag, "P", "an escaped backslash and n end no line: the last entry stays partial");
});

t.test("16 KiB partial entries: P records until the entry with the newline", async (t) => {
  const chunk = "x".repeat(16 * 1024);
  const text = entry(chunk) + entry(chunk) + entry("tail\n") + entry("next\n");
  const r = convertAll(text, { more: true });
  const records = r.text.split("\n").slice(0, -1).map((l) => parseRecord(l)!);
  t.same(records.map((x) => x.tag), ["P", "P", "F", "F"]);
  t.equal(records.map((x) => x.content).slice(0, 3).join(""), chunk + chunk + "tail");
});

t.test("a partial entry at the end is held until the next entry, and stays P when the output ends", async (t) => {
  const text = entry("done\n") + entry("prompt> ");
  const more = convertAll(text, { more: true });
  t.equal(more.records, 1, "the partial entry waits");
  t.equal(more.consumed, Buffer.byteLength(entry("done\n")), "and is not consumed");
  // kubelet turns an F record into its content plus "\n": a FallbackToLogsOnError
  // termination message of `echo -n DONE` must read "DONE", not "DONE\n".
  t.match(convertAll(text).text, / stdout P prompt> \n$/, "the end of the output (or of a rotated file) keeps P");
});

t.test("an incomplete last line is not consumed; torn bytes before an entry are dropped and counted", async (t) => {
  const whole = entry("one\n");
  const r = convertAll(whole + '{"log":"tw', { more: true });
  t.equal(r.consumed, whole.length);
  const torn = '{"log":"half an ent' + entry("two\n");
  const s = convertAll(torn + "not json at all\n" + entry("three\n"));
  t.same(s.text.split("\n").slice(0, -1).map((l) => parseRecord(l)?.content), ["two", "three"]);
  t.equal(s.malformedBytes, '{"log":"half an ent'.length + "not json at all\n".length);
});

t.test("other JSON shapes (attrs, key order) go through the slow path", async (t) => {
  const line = '{"stream":"stderr","log":"with attrs\\n","attrs":{"tag":"x"},"time":"2026-01-02T03:04:05.1Z"}\n';
  t.equal(convertAll(line).text, "2026-01-02T03:04:05.100000000Z stderr F with attrs\n");
});

t.test("skip drops the entries a previous run already wrote", async (t) => {
  const r = convertAll(entry("1\n") + entry("2\n") + entry("3\n"), { more: true }, 2);
  t.equal(r.skipped, 2);
  t.match(r.text, /^\S+ stdout F 3\n$/);
});

t.test("output space runs out: conversion stops at a line boundary and continues", async (t) => {
  const input = Buffer.from(entry("a".repeat(100) + "\n").repeat(10));
  const out = Buffer.alloc(600);
  const converter = new JsonLogConverter();
  let pos = 0;
  let text = "";
  while (pos < input.length) {
    const r = converter.convert(input, pos, input.length, out, 0, { more: false });
    t.ok(r.consumed > 0);
    pos += r.consumed;
    text += out.toString("utf8", 0, r.written);
  }
  t.equal(text.split("\n").length - 1, 10);
});

/** A directory laid out like dockerd's: <dir>/<id>-json.log and rotated .1, .2 … */
async function dockerDir(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), "cridock-jsonlog-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "c-json.log");
  await writeFile(path, "");
  return {
    dir,
    path,
    write: (text: string) => appendFile(path, text),
    /** dockerd's rotation: shift .n, rename the live file to .1, create a new one. */
    async rotate(maxFiles: number) {
      for (let i = maxFiles - 1; i > 1; i--) await rename(`${path}.${i - 1}`, `${path}.${i}`).catch(() => undefined);
      await rename(path, `${path}.1`);
      await writeFile(path, "");
    },
  };
}

async function readAll(tail: JsonLogTail): Promise<string> {
  const buf = Buffer.alloc(1 << 16);
  let text = "";
  for (;;) {
    const n = await tail.read(buf, 0);
    if (n > 0) {
      text += buf.toString("utf8", 0, n);
      continue;
    }
    const step = await tail.next();
    if (step === "idle") return text;
  }
}

t.test("tail: a rotation mid-read drains the old file before the new one, even when Docker deleted it", async (t) => {
  const d = await dockerDir(t);
  await d.write("a1\na2\n");
  const tail = new JsonLogTail({ path: d.path, maxFiles: 2, logger: log });
  t.teardown(() => tail.close());
  await tail.openFromStart();
  const buf = Buffer.alloc(3);
  t.equal(await tail.read(buf, 0), 3, "reading is under way");
  await d.write("a3\n");
  await d.rotate(2);
  await d.write("b1\n");
  await tail.refresh();
  // Another rotation: Docker deletes the file being read (max-file 2).
  await d.rotate(2);
  await d.write("c1\n");
  t.equal(await readAll(tail), "a2\na3\nb1\nc1\n", "nothing lost, nothing twice");
  t.same(tail.lost, { events: 0, bytes: 0 });
});

t.test("tail: resume finds the saved file under its rotated name; a position rotated away is reported", async (t) => {
  const d = await dockerDir(t);
  await d.write("one\ntwo\n");
  const first = new JsonLogTail({ path: d.path, maxFiles: 3, logger: log });
  await first.openFromStart();
  const buf = Buffer.alloc(4);
  await first.read(buf, 0);
  const saved = first.position(0);
  await first.close();
  // cridock is down: Docker rotates twice.
  await d.rotate(3);
  await d.write("three\n");
  await d.rotate(3);
  await d.write("four\n");
  const again = new JsonLogTail({ path: d.path, maxFiles: 3, logger: log });
  t.same(await again.openAt(saved), saved, "the saved file was found as .2");
  t.equal(await readAll(again), "two\nthree\nfour\n");
  await again.close();

  // Once more down, three rotations with max-file 3: the saved file is deleted.
  const mark = (await stat(d.path)).ino;
  const later = { inode: mark, offset: 5, head: Buffer.from("four\n").toString("base64") };
  for (const line of ["five\n", "six\n", "seven\n"]) {
    await d.rotate(3);
    await d.write(line);
  }
  const lossy = new JsonLogTail({ path: d.path, maxFiles: 3, logger: log });
  t.teardown(() => lossy.close());
  const from = await lossy.openAt(later);
  t.equal(from.offset, 0, "continues at the oldest file kept");
  t.equal(lossy.lost.events, 1, "the loss is counted");
  t.equal(await readAll(lossy), "five\nsix\nseven\n");
});

t.test("tail: a reused inode with other content is not taken for the saved file", async (t) => {
  const d = await dockerDir(t);
  await d.write("new content\n");
  const tail = new JsonLogTail({ path: d.path, maxFiles: 1, logger: log });
  t.teardown(() => tail.close());
  const ino = (await stat(d.path)).ino;
  const from = await tail.openAt({ inode: ino, offset: 4, head: Buffer.from("old content\n").toString("base64") });
  t.equal(from.offset, 0);
  t.equal(tail.lost.events, 1);
});

t.test("tail: max-file 1 truncation under the reader is detected and counted", async (t) => {
  const d = await dockerDir(t);
  await d.write("aaaa\nbbbb\n");
  const tail = new JsonLogTail({ path: d.path, maxFiles: 1, logger: log });
  t.teardown(() => tail.close());
  await tail.openFromStart();
  t.equal(await readAll(tail), "aaaa\nbbbb\n");
  await truncate(d.path, 0);
  await d.write("cc\n");
  t.equal(await tail.next(), "truncated");
  t.equal(tail.lost.events, 1);
  t.equal(await readAll(tail), "cc\n");
});

/** A Docker client that only answers inspect, for a container whose json log is `path`. */
function fakeDocker(path: string, state: { running: boolean }): DockerClient {
  return {
    inspectContainer: async () => ({
      LogPath: path,
      HostConfig: { LogConfig: { Type: "json-file", Config: { "max-file": "3" } } },
      State: { Running: state.running, Pid: state.running ? 4_000_000 : 0 },
    }),
  } as unknown as DockerClient;
}

async function criLines(path: string): Promise<string[]> {
  const text = await readFile(path, "utf8");
  const out: string[] = [];
  let partial = "";
  for (const line of text.split("\n").slice(0, -1)) {
    const r = parseRecord(line);
    if (!r) throw new Error(`not a CRI record: ${line}`);
    partial += r.content;
    if (r.tag === "F") {
      out.push(partial);
      partial = "";
    }
  }
  // A last P run is output that ended mid-line.
  if (partial !== "") out.push(partial);
  return out;
}

t.test("follower: every line once across rotations and a restart with rotation while down; truncated last entry dropped", async (t) => {
  const d = await dockerDir(t);
  const state = { running: true };
  const docker = fakeDocker(d.path, state);
  const store = new FollowStateStore(join(d.dir, "state"));
  const criPath = join(d.dir, "cri", "0.log");
  const id = "a".repeat(64);
  let n = 0;
  const writeLines = async (count: number) => {
    let text = "";
    for (let i = 0; i < count; i++) text += entry(`${++n}\n`);
    await d.write(text);
  };
  await writeLines(1000);
  const first = new JsonFileFollower({ docker, store, logger: log, containerId: id, logPath: criPath, tty: false });
  await first.startFresh();
  await writeLines(1000);
  await d.rotate(3);
  await writeLines(1000);
  // A 40 KiB line in 16 KiB entries, spanning a rotation.
  await d.write(entry("y".repeat(16384)) + entry("y".repeat(16384)));
  await d.rotate(3);
  await d.write(entry("y".repeat(8000) + "\n"));
  for (let i = 0; i < 100 && (await criLines(criPath).catch(() => [])).length < n + 1; i++) await new Promise((r) => setTimeout(r, 20));
  await first.stop();

  // Down: output continues and Docker rotates once more.
  await writeLines(500);
  await d.rotate(3);
  await writeLines(500);
  const saved = await store.load(id);
  t.equal(saved?.kind, "json-file");
  const second = new JsonFileFollower({ docker, store, logger: log, containerId: id, logPath: criPath, tty: false });
  await second.resume(saved!);
  await writeLines(1000);
  // The container exits leaving a torn entry (a write cut short) and no newline on its last output.
  await d.write(entry("last words") + '{"log":"tor');
  state.running = false;
  second.checkExit();
  await second.wait();
  t.ok(second.done);
  const lines = await criLines(criPath);
  const numbers = lines.filter((l) => /^\d+$/.test(l)).map(Number);
  t.equal(numbers.length, 5000);
  t.ok(numbers.every((x, i) => x === i + 1), "every number once, in order");
  t.ok(lines.includes("y".repeat(16384 * 2 + 8000)), "the long line is whole");
  t.equal(lines[lines.length - 1], "last words", "the last output is there");
  // Unended, so P: kubelet would read an F record as "last words\n", a newline the container never wrote.
  const records = (await readFile(criPath, "utf8")).split("\n").slice(0, -1);
  t.match(records[records.length - 1], / stdout P last words$/, "and its record stays P");
  t.same(second.lost, { events: 0, bytes: 0 });
  await second.stop();
});

t.test("follower: a restart after records were written past the checkpoint writes none twice", async (t) => {
  const d = await dockerDir(t);
  const state = { running: true };
  const docker = fakeDocker(d.path, state);
  const store = new FollowStateStore(join(d.dir, "state"));
  const criPath = join(d.dir, "0.log");
  const id = "b".repeat(64);
  const first = new JsonFileFollower({ docker, store, logger: log, containerId: id, logPath: criPath, tty: false });
  await first.startFresh();
  await d.write(entry("1\n") + entry("2\n"));
  for (let i = 0; i < 100 && (await criLines(criPath)).length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  const checkpoint = await store.load(id);
  await first.stop();
  // Simulate a crash: the checkpoint on disk is older than the file (two more records and a torn one).
  await d.write(entry("3\n") + entry("4\n"));
  const state2 = { ...checkpoint! };
  const { source } = state2;
  t.ok(source, "the checkpoint names Docker's file and offset");
  const cri = await readFile(criPath, "utf8");
  const ts = cri.split(" ")[0];
  await appendFile(criPath, `${ts} stdout F 3\n${ts} stdout F 4\n${ts} stdout F 5-torn`);
  const second = new JsonFileFollower({ docker, store, logger: log, containerId: id, logPath: criPath, tty: false });
  await second.resume(state2);
  await d.write(entry("5\n"));
  state.running = false;
  second.checkExit();
  await second.wait();
  t.same(await criLines(criPath), ["1", "2", "3", "4", "5"]);
  await second.stop();
});
