// src/cri/proto-types.ts is generated from the proto; it must not go stale.
import t from "tap";
import { readFileSync } from "node:fs";
import { generate } from "../../scripts/build/proto-types.ts";

t.test("proto-types.ts is up to date (run: npx tsx scripts/build/proto-types.ts)", async (t) => {
  const committed = readFileSync(new URL("../../src/cri/proto-types.ts", import.meta.url), "utf8");
  t.equal(committed, generate());
});
