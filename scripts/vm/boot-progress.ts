/**
 * How the cgroup v2 test node's boot is going, read from its serial console
 * log, for the wait for ssh in scripts/vm/boot.sh (wait_for_ssh), which runs
 * this every few seconds while the guest's ssh does not answer yet:
 *
 *   booting  the console still prints (or the guest is younger than the
 *            silence limit): wait on, up to the hard cap
 *   panic    the console shows a kernel panic or oops (Debian's kernels can
 *            panic at boot under TCG, in a race with live code patching):
 *            fails at once, and boot.sh boots it again
 *   stuck    nothing new on the console for the silence limit (boot.sh
 *            boots it again too: a TCG guest starved by a loaded host
 *            can stall for good after a kernel report, an rcu stall or a
 *            hung task); the reason names the kernel's last report
 *   timeout  the hard cap passed while the console still printed
 *   crashed  qemu killed itself: an assertion's abort or a fault of its own
 *            (exit status 128 + SIGABRT, SIGSEGV, SIGBUS, SIGILL or
 *            SIGFPE), the emulator's bug and not the guest's; boot.sh boots
 *            it again. Seen in CI: multi-threaded TCG aborting in
 *            iotlb_to_section while a Debian 13 guest booted
 *   exited   qemu exited otherwise (not through a panic): a bad setting,
 *            or killed from outside (SIGKILL, SIGTERM), which a new try
 *            would not mend
 *
 * Usage (tsx scripts/vm/boot-progress.ts ...):
 *
 *   start STATE CONSOLE   at qemu's launch: this boot's output begins at
 *                         CONSOLE's current end (a reboot's boot, or a
 *                         boot tried again, is appended to what was before)
 *   poll STATE --silence S --timeout S [--try N] [--console CONSOLE]
 *        [--qemu-exited STATUS --qemu-log FILE]
 *                         prints two lines: the verdict, then the console's
 *                         last line while booting, or the reason once the
 *                         boot failed (one line, which scripts/vm/node.sh
 *                         ends with). --try N says this is the boot's Nth
 *                         try; --console the console when STATE is missing
 *                         (the boot then begins at its top); --qemu-exited
 *                         that qemu is gone (STATUS "?" when unknown), FILE
 *                         its log (its stderr).
 *
 * STATE is a small JSON file: where this boot begins in the console, when
 * qemu started, the console's size when it last grew and how far it has
 * been searched for a panic, so that a poll reads only what the console
 * gained since the last one (and its last few kilobytes).
 */
import { closeSync, openSync, readFileSync, readSync, renameSync, statSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

export type Verdict = "booting" | "panic" | "stuck" | "timeout" | "crashed" | "exited";

/**
 * The signals qemu raises against itself, by the exit status a shell
 * reports for them (128 + the signal's number on Linux x86-64): an
 * assert() or abort() of its own, or a fault in its own code. Signals sent
 * from outside (SIGKILL from the OOM killer or a test's cleanup, SIGTERM
 * from stop) are not among them: such an exit is not the emulator's bug.
 */
const SELF_INFLICTED: ReadonlyMap<string, string> = new Map([
  ["132", "SIGILL"],
  ["134", "SIGABRT"],
  ["135", "SIGBUS"],
  ["136", "SIGFPE"],
  ["139", "SIGSEGV"],
]);

/** The signal qemu died of by its own hand, from its exit status, or undefined. */
export function selfInflictedSignal(status: string): string | undefined {
  return SELF_INFLICTED.get(status);
}

/** A line of the console that says the guest's kernel died. */
export interface PanicLine {
  /** "panic" for a "Kernel panic - not syncing", "oops" for an oops or a kernel BUG. */
  kind: "panic" | "oops";
  /** The line, cleaned, without its printk timestamp. */
  line: string;
  /** The guest's uptime in seconds at the line (its printk timestamp), when it has one. */
  uptime?: number;
}

/** A kernel report a guest may live through, or not: the first line of its block. */
export interface KernelReport {
  /** The line, cleaned, without its printk timestamp. */
  line: string;
  /** The guest's uptime in seconds at the line, when it has one. */
  uptime?: number;
}

export interface BootState {
  console: string;
  /** Where this boot's output begins in the console file. */
  offset: number;
  /** When qemu started (ms since the epoch). */
  launchedAt: number;
  /** The console's size at the last poll. */
  size: number;
  /** When the console last grew (ms), launchedAt before it ever did. */
  grewAt: number;
  /** The console is searched for a panic up to here (whole lines only). */
  scanned: number;
  panic?: PanicLine & { seenAt: number };
  /** The last kernel report seen (a stall, a lockup, a hung task, a warning). */
  report?: KernelReport;
}

export interface Limits {
  /** Seconds of a console with nothing new that make the boot stuck. */
  silenceS: number;
  /** Seconds after qemu's start past which the boot has failed (the hard cap). */
  timeoutS: number;
}

export interface QemuExit {
  /** Its exit status, or "?" when unknown. */
  status: string;
  /** The last line of its stderr ("" when none). */
  lastLine: string;
}

export interface Judgement {
  verdict: Verdict;
  /** While booting the console's last line; else why the boot failed. One line. */
  text: string;
}

/** How long a line of the console may be in what is said. */
const LINE_MAX = 160;
/** How much of the console's end is read for its last line. */
const TAIL_BYTES = 8192;
/** How much new console a poll searches at most (a guest flooding its console). */
const SCAN_MAX = 4 << 20;

/**
 * The lines of the kernel's death, as its printk writes them (after the
 * timestamp): a panic, an oops (die()'s "DESCRIPTION: ERR [#N]", as
 * "Oops: 0000 [#1]", "general protection fault ...: 0000 [#1]",
 * "invalid opcode: 0000 [#1]"), and the BUG lines an oops begins with.
 * Not the warnings a loaded TCG guest prints and lives through ("BUG: soft
 * lockup", rcu stalls), nor a process's own fault ("traps: x[1] general
 * protection fault ip:... in libc", which has no "[#N]").
 */
const PANIC_PATTERNS: { kind: PanicLine["kind"]; pattern: RegExp }[] = [
  { kind: "panic", pattern: /^Kernel panic - not syncing/ },
  { kind: "oops", pattern: /^Oops[:\s]/ },
  { kind: "oops", pattern: /^kernel BUG at / },
  { kind: "oops", pattern: /^BUG: (unable to handle|kernel NULL pointer dereference|kernel paging request)/ },
  { kind: "oops", pattern: /: [0-9a-f]{4} \[#\d+\]/ },
];

/**
 * The first lines of the kernel's reports that a guest often lives
 * through, but that come before a guest stalled for good: what a stuck
 * boot's reason names, as its last console line is the report's last
 * ("</TASK>", "---[ end trace ... ]---"), which says nothing.
 */
const REPORT_PATTERNS: RegExp[] = [
  /^INFO: task .* blocked for more than/,
  /^rcu: INFO: /,
  /^INFO: rcu_\w+ (self-)?detected stall/,
  /^watchdog: BUG: soft lockup/,
  /^BUG: workqueue lockup/,
  /^WARNING: CPU: /,
  /^clocksource: .*unstable/,
];

const TIMESTAMP = /^\[\s*(\d+)\.\d+\]\s?/;

/** A console line as said: no terminal escapes, no control characters, trimmed, cut to LINE_MAX. */
export function cleanLine(raw: string): string {
  const text = raw
    // CSI sequences (colours, cursor moves) and other two-character escapes.
    .replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "")
    .replace(/\x1b[@-_]/g, "")
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "")
    .trim();
  return text.length > LINE_MAX ? `${text.slice(0, LINE_MAX - 3)}...` : text;
}

/** The console's lines: a carriage return ends one too (systemd redraws its status line with it). */
function splitLines(text: string): string[] {
  return text.split(/\r\n|\r|\n/);
}

/** The last line of TEXT with something on it, cleaned ("" when none). */
export function lastLine(text: string): string {
  const lines = splitLines(text);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = cleanLine(lines[i]!);
    if (line) return line;
  }
  return "";
}

/** TEXT's lines, cleaned, each without its printk timestamp and with the uptime that gave. */
function kernelLines(text: string): KernelReport[] {
  return splitLines(text).map((raw) => {
    const cleaned = cleanLine(raw);
    const stamp = TIMESTAMP.exec(cleaned);
    return stamp ? { line: cleaned.slice(stamp[0].length), uptime: Number(stamp[1]) } : { line: cleaned };
  });
}

/** The first line of TEXT that says the kernel died, if any. */
export function findPanic(text: string): PanicLine | undefined {
  for (const line of kernelLines(text)) {
    for (const { kind, pattern } of PANIC_PATTERNS) {
      if (pattern.test(line.line)) return { kind, ...line };
    }
  }
  return undefined;
}

/** The last line of TEXT that begins a kernel report (REPORT_PATTERNS), if any. */
export function findLastReport(text: string): KernelReport | undefined {
  let found: KernelReport | undefined;
  for (const line of kernelLines(text)) {
    if (REPORT_PATTERNS.some((pattern) => pattern.test(line.line))) found = line;
  }
  return found;
}

export function initialState(consolePath: string, offset: number, now: number): BootState {
  return { console: consolePath, offset, launchedAt: now, size: offset, grewAt: now, scanned: offset };
}

/**
 * The state after a look at the console, SIZE bytes long now, NEWLINES
 * being its whole lines from state.scanned up to SCANNEDTO. A console
 * shorter than before was truncated (a new start): this boot's output
 * then begins at its top.
 */
export function observe(state: BootState, size: number, newLines: string, scannedTo: number, now: number): BootState {
  const next = { ...state };
  if (size < state.size || size < state.offset) {
    next.offset = 0;
    next.scanned = 0;
    next.size = 0;
  }
  if (size !== next.size) {
    next.size = size;
    next.grewAt = now;
  }
  if (!next.panic && newLines) {
    const panic = findPanic(newLines);
    if (panic) next.panic = { ...panic, seenAt: now };
  }
  if (newLines) {
    const report = findLastReport(newLines);
    if (report) next.report = report;
  }
  next.scanned = Math.max(next.scanned, scannedTo);
  return next;
}

const seconds = (ms: number) => Math.max(0, Math.round(ms / 1000));

/**
 * The verdict on a boot: its state, the console's last line, the time
 * now, the limits, which try of the boot this is (1 for the first), and
 * how qemu exited if it did.
 */
export function judge(state: BootState, last: string, now: number, limits: Limits, attempt = 1, exit?: QemuExit): Judgement {
  const elapsed = seconds(now - state.launchedAt);
  const silent = seconds(now - state.grewAt);
  const onTry = attempt > 1 ? ` (try ${attempt})` : "";
  if (state.panic) {
    const at = state.panic.uptime ?? seconds(state.panic.seenAt - state.launchedAt);
    const tries = attempt > 1 ? ` (${attempt} tries)` : "";
    return { verdict: "panic", text: `kernel ${state.panic.kind} at ${at} s${tries}: ${state.panic.line}` };
  }
  if (exit) {
    const status = exit.status === "?" ? "qemu exited (status unknown)" : `qemu exited with status ${exit.status}`;
    const said = exit.lastLine || `nothing on its stderr; the console's last line: ${last || "none"}`;
    const signal = selfInflictedSignal(exit.status);
    if (signal) return { verdict: "crashed", text: `${status} (${signal}, qemu's own)${onTry}: ${said}` };
    return { verdict: "exited", text: `${status}${onTry}: ${said}` };
  }
  if (silent >= limits.silenceS) {
    const printed = state.size > state.offset;
    const said = printed && last ? `console silent for ${silent} s after '${last}'` : `console silent for ${silent} s: nothing printed since qemu started`;
    const report = state.report && `; the kernel's last report${state.report.uptime === undefined ? "" : ` (at ${state.report.uptime} s)`}: ${state.report.line}`;
    return { verdict: "stuck", text: `${said}${onTry}${report ?? ""}` };
  }
  if (elapsed >= limits.timeoutS) {
    return { verdict: "timeout", text: `no ssh after ${elapsed} s while the console was still printing${onTry}: ${last || "(nothing printed)"}` };
  }
  return { verdict: "booting", text: last || "no console output yet" };
}

// --- the files ----------------------------------------------------------------

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Bytes [from, to) of PATH (fewer when it is shorter). */
function readRange(path: string, from: number, to: number): Buffer {
  if (to <= from) return Buffer.alloc(0);
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const buffer = Buffer.alloc(to - from);
    const read = readSync(fd, buffer, 0, buffer.length, from);
    return buffer.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** The last line with something on it of PATH's last few kilobytes, not before FROM. */
function tailLine(path: string, from: number): string {
  const size = fileSize(path);
  return lastLine(readRange(path, Math.max(from, size - TAIL_BYTES), size).toString("utf8"));
}

function readState(path: string): BootState | undefined {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as BootState;
    return typeof parsed.offset === "number" && typeof parsed.launchedAt === "number" ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function writeState(path: string, state: BootState): void {
  const temporary = `${path}.${process.pid}`;
  writeFileSync(temporary, JSON.stringify(state) + "\n");
  renameSync(temporary, path);
}

/** `start`: a new boot's state, its output beginning at the console's current end. */
export function startBoot(statePath: string, consolePath: string, now = Date.now()): BootState {
  const state = initialState(consolePath, fileSize(consolePath), now);
  writeState(statePath, state);
  return state;
}

export interface PollOptions extends Limits {
  attempt?: number;
  /** qemu is gone: its status ("?" when unknown) and log. */
  qemuExited?: { status: string; log: string };
  /** The console when STATE does not exist yet (the boot then begins at its top). */
  console?: string;
}

/**
 * `poll`: reads what the console gained since the last poll, keeps the
 * state, and judges. A missing or unreadable state is a boot that began
 * now, at the console's top.
 */
export function pollBoot(statePath: string, options: PollOptions, now = Date.now()): Judgement {
  let state = readState(statePath);
  if (!state) {
    if (!options.console) throw new Error(`no boot state in ${statePath} (and no --console to begin one)`);
    state = initialState(options.console, 0, now);
  }
  const size = fileSize(state.console);
  let from = size < state.size || size < state.offset ? 0 : state.scanned;
  if (size - from > SCAN_MAX) from = size - SCAN_MAX;
  const gained = readRange(state.console, from, size);
  // Whole lines only, but for a qemu that is gone: its last line is all there will be.
  const end = options.qemuExited ? gained.length : gained.lastIndexOf(0x0a) + 1;
  const newLines = gained.subarray(0, end).toString("utf8");
  state = observe({ ...state, scanned: from }, size, newLines, from + end, now);
  writeState(statePath, state);
  const last = tailLine(state.console, state.offset);
  const exit = options.qemuExited && { status: options.qemuExited.status, lastLine: tailLine(options.qemuExited.log, 0) };
  return judge(state, last, now, options, options.attempt ?? 1, exit);
}

// --- the command line ---------------------------------------------------------

const USAGE =
  "usage: tsx scripts/vm/boot-progress.ts start STATE CONSOLE | poll STATE --silence S --timeout S [--try N] [--console FILE] [--qemu-exited STATUS --qemu-log FILE]";

function wholeNumber(name: string, value: string | undefined): number {
  if (value === undefined || !/^\d+$/.test(value)) throw new Error(`--${name} wants a whole number of seconds, not ${value ?? "nothing"}\n${USAGE}`);
  return Number(value);
}

export function main(argv: string[], now = Date.now()): string {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      silence: { type: "string" },
      timeout: { type: "string" },
      try: { type: "string" },
      console: { type: "string" },
      "qemu-exited": { type: "string" },
      "qemu-log": { type: "string" },
    },
  });
  const [command, statePath, consolePath, ...rest] = positionals;
  if (command === "start" && statePath && consolePath && rest.length === 0) {
    startBoot(statePath, consolePath, now);
    return "";
  }
  if (command === "poll" && statePath && !consolePath) {
    const exited = values["qemu-exited"];
    const judgement = pollBoot(
      statePath,
      {
        silenceS: wholeNumber("silence", values.silence),
        timeoutS: wholeNumber("timeout", values.timeout),
        attempt: values.try === undefined ? 1 : wholeNumber("try", values.try),
        ...(values.console ? { console: values.console } : {}),
        ...(exited !== undefined ? { qemuExited: { status: exited, log: values["qemu-log"] ?? "/dev/null" } } : {}),
      },
      now,
    );
    return `${judgement.verdict}\n${judgement.text}\n`;
  }
  throw new Error(USAGE);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    process.stdout.write(main(process.argv.slice(2)));
  } catch (err) {
    console.error(`vm-boot-progress: ${(err as Error).message}`);
    process.exit(2);
  }
}
