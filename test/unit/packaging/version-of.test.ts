/**
 * scripts/build/version-of.sh: how the .deb and the tarball learn the
 * version and commit of the executable they carry, from its --version line.
 * A line of another form, or one naming no commit, fails the build.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../helpers/cridock-process.ts";

const A = "0123456789abcdef0123456789abcdef01234567";

t.test("cridock_version_of reads version and commit from --version", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cridock-version-of-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  /** What cridock_version_of says of an executable printing `line`: its output, or undefined when it fails. */
  const versionOf = (line: string, status = 0): string | undefined => {
    const fake = join(dir, "cridock");
    writeFileSync(fake, `#!/bin/sh\nprintf '%s\\n' '${line}'\nexit ${status}\n`);
    chmodSync(fake, 0o755);
    const r = spawnSync("bash", ["-c", 'source "$1" && cridock_version_of "$2"', "bash", join(REPO_ROOT, "scripts/build/version-of.sh"), fake], { encoding: "utf8" });
    return r.status === 0 ? r.stdout : undefined;
  };
  t.equal(versionOf(`cridock 0.2.0 (commit ${A})`), `0.2.0 ${A}\n`);
  t.equal(versionOf(`cridock 0.2.0 (commit ${A}-dirty)`), `0.2.0 ${A}-dirty\n`);
  t.equal(versionOf(`cridock 1.10.3 (commit ${A})`), `1.10.3 ${A}\n`);
  t.equal(versionOf("cridock 0.2.0 (commit unknown)"), undefined, "a package names its commit");
  t.equal(versionOf("cridock 0.1.0"), undefined, "an executable from before the commit was printed");
  t.equal(versionOf(`cridock 0.2.0 (commit ${A.slice(0, 12)})`), undefined, "a short id");
  t.equal(versionOf(`cridock 0.2.0 (commit ${A}) extra`), undefined);
  t.equal(versionOf(`cridock 0.2.0 (commit ${A})`, 1), undefined, "an executable that fails");
});
