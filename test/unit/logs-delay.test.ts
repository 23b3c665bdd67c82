/**
 * delay() is called thousands of times on one follower's abort signal: each
 * call must leave no listener behind once its timer fired.
 */
import t from "tap";
import { getEventListeners } from "node:events";
import { delay } from "../../src/logs/follower-base.ts";

t.test("a delay that ran out removes its abort listener", async (t) => {
  const controller = new AbortController();
  for (let i = 0; i < 20; i++) await delay(1, controller.signal);
  t.equal(getEventListeners(controller.signal, "abort").length, 0);
});

t.test("an abort ends a pending delay at once", async (t) => {
  const controller = new AbortController();
  const started = performance.now();
  const waiting = delay(60_000, controller.signal);
  controller.abort();
  await waiting;
  t.ok(performance.now() - started < 1000);
});
