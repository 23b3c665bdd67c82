/**
 * scripts/vm/boot-progress.ts: how the wait for the cgroup v2 node's ssh
 * (scripts/vm/boot.sh) tells from the guest's console a boot that goes on
 * from one that is stuck or has panicked, or whose qemu crashed, and the
 * one line it fails with.
 */
import t from "tap";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanLine, findLastReport, findPanic, initialState, judge, lastLine, main, pollBoot, selfInflictedSignal, startBoot, type BootState } from "../../scripts/vm/boot-progress.ts";

const LIMITS = { silenceS: 300, timeoutS: 900 };
const T0 = 1_700_000_000_000;
const at = (s: number) => T0 + s * 1000;

/** A console file, its state file, and the boot's polls at given seconds after T0. */
function boot(t: { teardown(fn: () => unknown): void }, before = "") {
  const dir = mkdtempSync(join(tmpdir(), "vm-boot-progress-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const console = join(dir, "console.log");
  const state = join(dir, "boot.json");
  const qemuLog = join(dir, "qemu.log");
  writeFileSync(console, before);
  writeFileSync(qemuLog, "");
  startBoot(state, console, T0);
  return {
    console,
    state,
    qemuLog,
    print: (text: string) => appendFileSync(console, text),
    poll: (s: number, extra: { attempt?: number; qemuExited?: { status: string; log: string } } = {}) => pollBoot(state, { ...LIMITS, ...extra }, at(s)),
  };
}

t.test("the kernel's death is found on its line, with the guest's uptime", async (t) => {
  t.same(findPanic("[    0.000000] Linux version 6.12.0\n[    3.141592] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n"), {
    kind: "panic",
    line: "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b",
    uptime: 3,
  });
  t.same(findPanic("[    2.5] Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI\n[    2.6] Kernel panic - not syncing: Fatal exception\n"), {
    kind: "oops",
    line: "Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI",
    uptime: 2,
  }, "the first line of the death: the oops, not the panic it ends in");
  t.equal(findPanic("[   12.000001] invalid opcode: 0000 [#1] PREEMPT SMP PTI\n")?.kind, "oops", "Debian 12's kernel writes an oops without the word");
  t.equal(findPanic("[ 5.0] general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] SMP\n")?.kind, "oops");
  t.equal(findPanic("[ 5.0] BUG: kernel NULL pointer dereference, address: 0000000000000008\n")?.line, "BUG: kernel NULL pointer dereference, address: 0000000000000008");
  t.equal(findPanic("[ 5.0] kernel BUG at mm/slub.c:123!\n")?.kind, "oops");
  t.equal(findPanic("Kernel panic - not syncing: VFS: Unable to mount root fs")?.uptime, undefined, "a line without a timestamp has no uptime");
});

t.test("what a loaded TCG guest prints and lives through is no panic", async (t) => {
  for (const line of [
    "[   60.1] watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [swapper/0:1]",
    "[   61.2] rcu: INFO: rcu_preempt self-detected stall on CPU",
    "[   70.0] traps: dockerd[812] general protection fault ip:55d0c0 sp:7ffc error:0 in dockerd[400000+1000]",
    "[   71.0] systemd[1]: Started oops-reporter.service - Oops: collector.",
    "[  OK  ] Reached target multi-user.target - Multi-User System.",
  ]) {
    t.equal(findPanic(line), undefined, line);
  }
});

t.test("console lines are said without escapes, carriage returns or excess", async (t) => {
  t.equal(cleanLine("\x1b[0;32m  OK  \x1b[0m] Started ssh.service\r"), "OK  ] Started ssh.service");
  t.equal(cleanLine("x".repeat(500)).length, 160);
  t.equal(lastLine("one\ntwo\n\n  \n"), "two", "blank lines do not count");
  t.equal(lastLine("[  *** ] A start job is running\r[ ***  ] A start job is running (2s)\r"), "[ ***  ] A start job is running (2s)", "systemd's redrawn line: its last drawing");
  t.equal(lastLine(""), "");
});

t.test("an empty console is a boot with no output yet, not a failure", async (t) => {
  const b = boot(t);
  t.same(b.poll(0), { verdict: "booting", text: "no console output yet" });
  t.same(b.poll(299), { verdict: "booting", text: "no console output yet" });
});

t.test("a console silent past the limit is stuck, with its last line", async (t) => {
  const b = boot(t);
  b.print("[    0.000000] Linux version 6.1.0-31-amd64\n[    1.200000] Loading initial ramdisk\n");
  t.same(b.poll(10), { verdict: "booting", text: "[    1.200000] Loading initial ramdisk" });
  t.equal(b.poll(309).verdict, "booting", "299 s of silence");
  t.same(b.poll(310), { verdict: "stuck", text: "console silent for 300 s after '[    1.200000] Loading initial ramdisk'" });
});

t.test("a stuck boot's reason names the kernel's last report, not the trace's last line", async (t) => {
  const b = boot(t);
  b.print("[  300.1] rcu: INFO: rcu_preempt self-detected stall on CPU\n[  300.2]  <TASK>\n[  300.3]  </TASK>\n");
  b.print("[  421.0] INFO: task systemd-udevd:120 blocked for more than 120 seconds.\n[  421.4]  </TASK>\n");
  t.equal(b.poll(430).verdict, "booting");
  t.same(b.poll(730, { attempt: 2 }), {
    verdict: "stuck",
    text: "console silent for 300 s after '[  421.4]  </TASK>' (try 2); the kernel's last report (at 421 s): INFO: task systemd-udevd:120 blocked for more than 120 seconds.",
  });
});

t.test("the kernel's reports are found on their first line; a boot's ordinary lines are none", async (t) => {
  for (const line of [
    "watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [swapper/0:1]",
    "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "INFO: rcu_sched self-detected stall on CPU",
    "BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 31s!",
    "WARNING: CPU: 1 PID: 0 at kernel/time/clocksource.c:220 clocksource_watchdog+0x1/0x2",
    "clocksource: timekeeping watchdog on CPU1: Marking clocksource 'tsc' as unstable because the skew is too large:",
  ]) {
    t.same(findLastReport(`[   60.5] ${line}\n`), { line, uptime: 60 }, line);
  }
  t.equal(findLastReport("[  OK  ] Started ssh.service\n[   70.0] systemd[1]: Reached target multi-user.target\n[   71.0]  </TASK>\n"), undefined);
  t.same(findLastReport("rcu: INFO: a\nrcu: INFO: b\n"), { line: "rcu: INFO: b" }, "the last, without a timestamp no uptime");
});

t.test("a guest that prints nothing at all is stuck too, once past the limit", async (t) => {
  const b = boot(t);
  t.same(b.poll(301), { verdict: "stuck", text: "console silent for 301 s: nothing printed since qemu started" });
});

t.test("output resets the silence clock", async (t) => {
  const b = boot(t);
  b.print("[    1.0] early\n");
  t.equal(b.poll(5).verdict, "booting");
  b.print("[   90.0] systemd[1]: Starting docker.service\n");
  t.equal(b.poll(250).verdict, "booting");
  t.same(b.poll(540), { verdict: "booting", text: "[   90.0] systemd[1]: Starting docker.service" }, "290 s since the last growth");
  t.equal(b.poll(550).verdict, "stuck", "300 s since it");
});

t.test("a guest still printing at the hard cap has failed, saying so", async (t) => {
  const b = boot(t);
  for (let s = 0; s < 900; s += 60) {
    b.print(`[ ${s}.0] still going ${s}\n`);
    t.equal(b.poll(s).verdict, "booting");
  }
  t.same(b.poll(900), { verdict: "timeout", text: "no ssh after 900 s while the console was still printing: [ 840.0] still going 840" });
});

t.test("a panic fails the boot at once, with its line and the tries", async (t) => {
  const b = boot(t);
  b.print("[    0.0] Linux version 6.12.0\n[    3.4] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009\n[    3.5] ---[ end Kernel panic ]---\n");
  t.same(b.poll(6), { verdict: "panic", text: "kernel panic at 3 s: Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009" });
  t.same(b.poll(7, { attempt: 3 }), {
    verdict: "panic",
    text: "kernel panic at 3 s (3 tries): Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009",
  });
  b.print("x\n".repeat(100));
  t.equal(b.poll(20).verdict, "panic", "the panic stays found once the console goes on");
});

t.test("a panic is found on a whole line, or on the last one once qemu is gone", async (t) => {
  const b = boot(t);
  b.print("[    2.0] Oops: 0000 [#1] SMP");
  t.equal(b.poll(3).verdict, "booting", "half a line is not judged while qemu runs");
  t.same(b.poll(4, { qemuExited: { status: "0", log: b.qemuLog } }), { verdict: "panic", text: "kernel oops at 2 s: Oops: 0000 [#1] SMP" });
});

t.test("a panic split across two polls is found whole", async (t) => {
  const b = boot(t);
  b.print("[    1.0] ok\n[    2.0] Kernel panic - not ");
  t.equal(b.poll(3).verdict, "booting");
  b.print("syncing: Fatal exception\n");
  t.same(b.poll(4), { verdict: "panic", text: "kernel panic at 2 s: Kernel panic - not syncing: Fatal exception" });
});

t.test("qemu's exit fails the boot with the last line of its stderr; its own crash is told apart, to be booted again", async (t) => {
  const assertion = "qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.";
  const forward = "qemu-system-x86_64: -netdev user: Could not set up host forwarding rule 'tcp:127.0.0.1:2222-:22'";
  const cases: { status: string; stderr: string; attempt?: number; verdict: string; text: string }[] = [
    { status: "1", stderr: `qemu-system-x86_64: terminating on signal 15\n\n${forward}\n`, verdict: "exited", text: `qemu exited with status 1: ${forward}` },
    { status: "?", stderr: "", attempt: 2, verdict: "exited", text: "qemu exited (status unknown) (try 2): nothing on its stderr; the console's last line: [    1.0] booting" },
    { status: "134", stderr: `${assertion}\n`, verdict: "crashed", text: `qemu exited with status 134 (SIGABRT, qemu's own): ${assertion}` },
    { status: "139", stderr: "", attempt: 2, verdict: "crashed", text: "qemu exited with status 139 (SIGSEGV, qemu's own) (try 2): nothing on its stderr; the console's last line: [    1.0] booting" },
  ];
  const b = boot(t);
  b.print("[    1.0] booting\n");
  for (const [i, c] of cases.entries()) {
    writeFileSync(b.qemuLog, c.stderr);
    t.same(b.poll(40 + i, { qemuExited: { status: c.status, log: b.qemuLog }, ...(c.attempt ? { attempt: c.attempt } : {}) }), { verdict: c.verdict, text: c.text }, `status ${c.status}`);
  }
  for (const status of ["0", "137", "143", "6", "1134", " 134"]) {
    t.equal(b.poll(50, { qemuExited: { status, log: b.qemuLog } }).verdict, "exited", `status '${status}': not qemu's own crash (killed from outside, or no signal), so not booted again`);
  }
  t.equal(selfInflictedSignal("135"), "SIGBUS");
});

t.test("a reboot's boot is judged from where it begins in the console", async (t) => {
  // The previous boot's oops and shutdown stay in the console log, before this boot's output.
  const b = boot(t, "[  100.0] Oops: 0000 [#1] SMP\n[  200.0] reboot: Restarting system\n");
  t.same(b.poll(1), { verdict: "booting", text: "no console output yet" }, "nothing of this boot yet, and the old oops is not its");
  b.print("[    0.5] Linux version 6.1.0\n");
  t.same(b.poll(2), { verdict: "booting", text: "[    0.5] Linux version 6.1.0" });
});

t.test("a console truncated under the watch is read again from its top", async (t) => {
  const b = boot(t, "x".repeat(4000) + "\n");
  writeFileSync(b.console, "[    0.1] Linux version 6.1.0\n[    1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n");
  t.equal(b.poll(2).verdict, "panic");
});

t.test("the state keeps where the boot is, so a poll reads only what is new", async (t) => {
  const b = boot(t, "old\n");
  b.print("[    1.0] one\n[    2.0] tw");
  b.poll(5);
  const state = JSON.parse(readFileSync(b.state, "utf8")) as BootState;
  t.same({ offset: state.offset, launchedAt: state.launchedAt, grewAt: state.grewAt, scanned: state.scanned }, { offset: 4, launchedAt: T0, grewAt: at(5), scanned: 4 + 14 });
});

t.test("judge is the verdict alone: the panic first, then qemu's exit, the silence, the cap", async (t) => {
  const state: BootState = { ...initialState("/c", 0, T0), size: 10, grewAt: T0, panic: { kind: "panic", line: "Kernel panic - not syncing: x", seenAt: at(4) } };
  t.equal(judge(state, "last", at(1000), LIMITS, 1, { status: "0", lastLine: "" }).verdict, "panic");
  const { panic: _, ...alive } = state;
  t.equal(judge(alive, "last", at(1000), LIMITS, 1, { status: "0", lastLine: "" }).verdict, "exited");
  t.equal(judge(alive, "last", at(1000), LIMITS).verdict, "stuck", "silent 1000 s: stuck, past the cap as well");
  t.equal(judge({ ...alive, grewAt: at(950) }, "last", at(1000), LIMITS).verdict, "timeout");
  t.same(judge(state, "", at(5), LIMITS), { verdict: "panic", text: "kernel panic at 4 s: Kernel panic - not syncing: x" }, "no printk time: the seconds since qemu started");
});

t.test("the command line: start, then polls of two lines each", async (t) => {
  const b = boot(t);
  b.print("[    1.0] Loading initial ramdisk\n");
  t.equal(main(["start", b.state, b.console], T0), "");
  t.equal(main(["poll", b.state, "--silence", "300", "--timeout", "900"], at(2)), "booting\nno console output yet\n", "start moved the boot's beginning to the console's end");
  b.print("[    2.0] Run /init as init process\n");
  t.equal(main(["poll", b.state, "--silence", "300", "--timeout", "900", "--try", "2"], at(3)), "booting\n[    2.0] Run /init as init process\n");
  t.equal(
    main(["poll", b.state, "--silence", "300", "--timeout", "900", "--qemu-exited", "137", "--qemu-log", b.qemuLog], at(4)),
    "exited\nqemu exited with status 137: nothing on its stderr; the console's last line: [    2.0] Run /init as init process\n",
  );
  t.throws(() => main(["poll", b.state, "--silence", "abc", "--timeout", "900"]), /--silence wants a whole number/);
  t.throws(() => main(["poll"]), /usage:/);
  t.throws(() => main(["poll", join(b.state, "..", "missing.json"), "--silence", "1", "--timeout", "1"]), /no boot state/);
  const fresh = join(b.state, "..", "fresh.json");
  t.equal(main(["poll", fresh, "--silence", "300", "--timeout", "900", "--console", b.console], at(5)), "booting\n[    2.0] Run /init as init process\n", "no state: the boot begins at the console's top");
});
