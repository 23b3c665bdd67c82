import t from "tap";
import { byCreation } from "../../../../src/runtime/pod-checkpoint/checkpoint.ts";

t.test("a pod's containers are checkpointed oldest first, to the nanosecond", async (t) => {
  const listed = [
    { Id: "c", Created: "2026-12-06T13:09:40.000000300Z" },
    { Id: "b", Created: "2026-12-06T13:09:40.0000002Z" },
    { Id: "a", Created: "2026-12-06T13:09:39.999999999Z" },
    { Id: "d", Created: "2026-12-06T14:09:40+01:00" },
  ];
  t.same(
    [...listed].sort(byCreation).map((c) => c.Id),
    ["a", "d", "b", "c"],
    "whole seconds first (a zone offset included), then the fraction however many digits Docker printed",
  );
  t.same(
    [{ Id: "y", Created: "not a time" }, { Id: "x", Created: "2026-12-06T13:09:40Z" }].sort(byCreation).map((c) => c.Id),
    ["x", "y"],
    "a time Docker would never print sorts last, not first",
  );
});
