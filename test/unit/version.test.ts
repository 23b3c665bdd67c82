/**
 * One version number: src/version.ts (what --version prints, what the
 * executable and the packages are named after) and package.json agree.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { main } from "../../src/main.ts";

t.test("src/version.ts and package.json carry the same version", async (t) => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  t.equal(CRIDOCK_VERSION, pkg.version);
});

t.test("--version prints it", async (t) => {
  const written: string[] = [];
  const codes: number[] = [];
  const write = process.stdout.write.bind(process.stdout);
  // tap reports on stdout too: only the calls' own output is captured.
  process.stdout.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stdout.write;
  try {
    codes.push(await main(["--version"]));
    codes.push(await main(["check", "--version"]));
  } finally {
    process.stdout.write = write;
  }
  t.same(codes, [0, 0]);
  t.same(written, [`cridock ${CRIDOCK_VERSION}\n`, `cridock ${CRIDOCK_VERSION}\n`]);
});
