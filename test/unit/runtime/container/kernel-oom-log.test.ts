import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { KernelOomLog, oomKilledContainer } from "../../../../src/runtime/container/kernel-oom-log.ts";
import { createLogger } from "../../../../src/log.ts";

const A = "856e82d8c047a7bbb0dd3d171f848c1986b0faf48f81748be3f0c116c4b3bc9b";
const B = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/** The kernel's line for a kill in a memory cgroup (mm/oom_kill.c's format). */
function killLine(taskMemcg: string, seq: number): string {
  return (
    `3,${seq},14716792040,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,` +
    `oom_memcg=${taskMemcg},task_memcg=${taskMemcg},task=dd,pid=30986,uid=0\n`
  );
}

t.test("the container is the last element of the task's memory cgroup, under either driver", async (t) => {
  t.equal(oomKilledContainer(`oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/docker/${A},task=dd,pid=1,uid=0`), A, "cgroupfs");
  t.equal(
    oomKilledContainer(
      `oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/kubepods.slice/kubepods-burstable.slice,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/docker-${A}.scope,task=x,pid=2,uid=0`,
    ),
    A,
    "systemd: the task's cgroup, not the pod's that hit its limit",
  );
  t.equal(oomKilledContainer(`oom-kill:constraint=CONSTRAINT_NONE,task_memcg=/user.slice,task=x,pid=3,uid=0`), undefined, "not a container");
  t.equal(oomKilledContainer(`Memory cgroup out of memory: Killed process 30986 (dd) /docker/${A}`), undefined, "other lines");
  t.equal(oomKilledContainer(`oom-kill:task_memcg=/docker/${A}x,task=x`), undefined, "no longer id than 64 hex");
});

t.test("reads the records logged since its last read, and only then", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cridock-kmsg-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "kmsg");
  fs.writeFileSync(file, `6,1,100,-;systemd[1]: Started something.\n SUBSYSTEM=x\n${killLine(`/docker/${A}`, 2)}`);
  const log = new KernelOomLog(createLogger("silent"), file);
  t.teardown(() => log.close());
  t.ok(log.killedIn(A), "a kill already in the log");
  t.notOk(log.killedIn(B), "no kill for another container");
  fs.appendFileSync(file, killLine(`/system.slice/docker-${B}.scope`, 3));
  t.ok(log.killedIn(B), "a kill logged after the first read");
  t.ok(log.killedIn(A), "the first one is remembered");
});

t.test("a log it cannot open leaves Docker's word", async (t) => {
  const log = new KernelOomLog(createLogger("silent"), "/nonexistent/kmsg");
  t.notOk(log.killedIn(A));
  t.notOk(log.killedIn(A), "and does not try again");
});
