/**
 * The checks a pod deletion makes many times, whether a pod's network
 * namespace is still live (liveNetns, before CNI DEL) and whether a followed
 * container's process is still in /proc (ContainerExitCheck), answer
 * without libuv's threadpool. The pool's queue is shared by every file
 * operation: with it held (slow disk I/O, or two saturated cores during a
 * mass deletion, where the event loop waited up to 70 ms to queue such a
 * round), these must still answer at once.
 */
import t from "tap";
import { liveNetns } from "../../src/network/netns.ts";
import { ContainerExitCheck } from "../../src/logs/container-exit.ts";
import { occupyThreadpool, within } from "../helpers/busy-threadpool.ts";

t.test("liveNetns answers while every threadpool thread is held", async (t) => {
  const pool = await occupyThreadpool();
  try {
    t.equal(await within(liveNetns("/proc/self/ns/net"), 2000), "/proc/self/ns/net", "our own namespace is live, without the pool");
    t.equal(await within(liveNetns("/proc/999999999/ns/net"), 2000), "", "a gone process's namespace is gone, without the pool");
  } finally {
    await pool.release();
  }
});

t.test("a container's exit check answers from /proc while every threadpool thread is held", async (t) => {
  let inspects = 0;
  const docker = {
    inspectContainer: async () => {
      inspects++;
      return { State: { Running: false } } as never;
    },
  };
  const check = new ContainerExitCheck(docker, "c1");
  // Our own pid stands for the container's process: it is in /proc.
  check.noteInspect(true, process.pid);
  const pool = await occupyThreadpool();
  try {
    t.equal(await within(check.exited(), 2000), false, "a process in /proc has not exited, without the pool");
    t.equal(inspects, 0, "Docker was not asked");
  } finally {
    await pool.release();
  }
  check.noteInspect(true, 999_999_999);
  t.equal(await check.exited(), true, "a process gone from /proc sends the check to Docker, which says it exited");
  t.equal(inspects, 1);
});
