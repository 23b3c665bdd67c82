// The whole tree type-checks (`npm run typecheck`): tests load through tsx
// and cridock runs from the bundle or tsx, and neither checks types, so a
// type error would otherwise reach main unnoticed.
import t from "tap";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/cridock-process.ts";

t.test("tsc --noEmit finds no error in src, test and scripts", (t) => {
  const tsc = spawnSync(process.execPath, [join(REPO_ROOT, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", REPO_ROOT], {
    encoding: "utf8",
    timeout: 300_000,
  });
  t.equal(tsc.error, undefined, "tsc ran");
  t.equal(tsc.status, 0, `tsc's errors:\n${tsc.stdout}${tsc.stderr}`);
  t.end();
});
