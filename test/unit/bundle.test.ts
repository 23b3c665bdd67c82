/**
 * The prebuilt bundle (scripts/build/bundle.ts) runs on its own: it finds the CRI
 * proto from where it lives (one folder below the package root, like dist/),
 * serves the CRI socket and answers Status, here with no dockerd behind it
 * (RuntimeReady false, naming the socket). The bundle is built into a
 * scratch folder and removed afterwards.
 */
import t from "tap";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { spawnSync } from "node:child_process";
import { assertAscii, buildBundle } from "../../scripts/build/bundle.ts";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { CriClient } from "../helpers/cri-client.ts";
import { REPO_ROOT, spawnBuiltCridock } from "../helpers/cridock-process.ts";

t.test("the bundle serves the CRI API without tsx", async (t) => {
  const outDir = await mkdtemp(join(REPO_ROOT, ".bundle-test-"));
  const scratch = await mkdtemp(join(tmpdir(), "cridock-bundle-"));
  t.teardown(async () => {
    await rm(outDir, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
  });
  // A commit given to the build (as outside a git checkout), to see that the bundle carries it.
  const commit = "0123456789abcdef0123456789abcdef01234567";
  const given = process.env.CRIDOCK_BUILD_COMMIT;
  process.env.CRIDOCK_BUILD_COMMIT = commit;
  let modules: number;
  try {
    ({ modules } = await buildBundle(join(basename(outDir), "cridock.js")));
  } finally {
    if (given === undefined) delete process.env.CRIDOCK_BUILD_COMMIT;
    else process.env.CRIDOCK_BUILD_COMMIT = given;
  }
  t.ok(modules > 50, `bundled ${modules} modules`);

  const entry = join(outDir, "cridock.js");
  // The commit is baked in: with no git to ask (an empty PATH), the bundle still names it.
  const version = spawnSync(process.execPath, ["--input-type=module", "-e", `const { main } = await import(${JSON.stringify(entry)}); process.exit(await main(["--version"]));`], {
    encoding: "utf8",
    env: { PATH: "", NODE_OPTIONS: "" },
  });
  t.equal(version.status, 0, version.stderr);
  t.equal(version.stdout, `cridock ${CRIDOCK_VERSION} (commit ${commit})\n`, "--version names the version and the commit it was built from");

  const socket = join(scratch, "cri.sock");
  const script = `const { main } = await import(${JSON.stringify(entry)}); process.exit(await main(process.argv.slice(1)));`;
  const { child, stderr, exited } = spawnBuiltCridock(
    t,
    process.execPath,
    ["--input-type=module", "-e", script, "--", `--container-runtime-endpoint=unix://${socket}`, `--root-directory=${join(scratch, "root")}`, `--docker-endpoint=unix://${join(scratch, "no-docker.sock")}`, "--network-plugin=no-op", "--log-level=warn"],
    { ...process.env, NODE_OPTIONS: "" },
  );

  const client = new CriClient(socket);
  let status: { status: { conditions: { type: string; status: boolean; message: string }[] } } | undefined;
  for (let i = 0; i < 100 && !status; i++) {
    if (child.exitCode !== null) break;
    status = await client.call("Status", {}).catch(() => undefined);
    if (!status) await new Promise((r) => setTimeout(r, 100));
  }
  client.close();
  t.ok(status, `the bundle served Status (stderr: ${stderr()})`);
  const runtime = status?.status.conditions.find((c) => c.type === "RuntimeReady");
  t.equal(runtime?.status, false, "no dockerd: RuntimeReady is false");
  t.match(runtime?.message ?? "", /no-docker\.sock/, "and says which socket it tried");
  child.kill("SIGTERM");
  t.equal(await exited, 0, "SIGTERM: exits 0");

  // What it carries: never-loaded packages stay out of the source V8 keeps resident (docs/performance.md).
  const text = await readFile(entry, "utf8");
  t.notMatch(text, /addIncludePathResolver/, "@grpc/proto-loader (and the protobufjs 7 it brings) is not bundled");
  t.match(text, /@grpc\/proto-loader is not in cridock's bundle/, "grpc-js's lazy require of it would fail saying why");
  t.notMatch(text, /[^\x00-\x7f]/, "ASCII only: V8 keeps it one byte a character");
});

t.test("a non-ASCII character in a built script stops the build, naming it and where", async (t) => {
  t.doesNotThrow(() => assertAscii("a.js", 'const re = /\\u00b5s/;\n'));
  t.throws(() => assertAscii("a.js", "const a = 1;\nconst re = /(ns|µs)/;\n"), /a\.js: non-ASCII "µ" \(U\+00B5\) on line 2, in "const a = 1; const re = \/\(ns\|µs\)\/; ": V8 would keep the whole script as UTF-16/);
});
