/**
 * undici's HTTP parser (llhttp, WebAssembly) must stay on V8's baseline
 * compiler, Liftoff: tiering it up to TurboFan took about 35 MB of compiler
 * memory on a background thread, of which glibc kept 10 MB or more
 * (src/docker/undici-pool.ts). The executable starts V8 with --liftoff-only
 * (START_V8_OPTIONS). Here a small WebAssembly function is run hot in a node
 * started with those options, and in one started without them, and V8 is
 * asked which tier runs it (--allow-natives-syntax). The third case records
 * why cridock sets nothing at run time: V8 14 takes --liftoff-only from
 * node:v8's setFlagsFromString and still tiers up.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { START_V8_OPTIONS, LIFTOFF_ONLY_OPTION } from "../../src/v8-start-options.ts";

// (func (export "f") (param i32) (result i32) (local i32): counts param down to 0, summing.
const MODULE = [
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00, 0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00,
  0x0a, 0x1b, 0x01, 0x19, 0x01, 0x01, 0x7f, 0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x20, 0x01, 0x6a, 0x21, 0x01, 0x20, 0x00, 0x0d, 0x00, 0x0b, 0x20, 0x01, 0x0b,
];

/** The tier V8 runs the hot function on, in a node started with `options`, after `prelude` ran. */
function hotTier(options: readonly string[], prelude = ""): string {
  const script = `
    ${prelude}
    const { instance } = await WebAssembly.instantiate(new Uint8Array(${JSON.stringify(MODULE)}));
    const f = instance.exports.f;
    const tier = new Function("f", "return %IsTurboFanFunction(f) ? 'turbofan' : %IsLiftoffFunction(f) ? 'liftoff' : 'neither'");
    // Hot, with pauses for the background compile a tier-up starts.
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 200; i++) f(10000);
      await new Promise((r) => setTimeout(r, 20));
    }
    process.stdout.write(tier(f));
  `;
  const child = spawnSync(process.execPath, ["--allow-natives-syntax", ...options, "--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  if (child.status !== 0) throw new Error(`node ${options.join(" ")} exited with ${child.status}: ${child.stderr}`);
  return child.stdout;
}

t.test("a hot WebAssembly function stays on Liftoff under the executable's start options", async (t) => {
  t.equal(hotTier(START_V8_OPTIONS), "liftoff", `node ${START_V8_OPTIONS.join(" ")}`);
  t.equal(hotTier([]), "turbofan", "and is tiered up without them: the check can tell");
});

t.test("--liftoff-only set at run time does not hold it (V8 14): nothing in cridock relies on that", async (t) => {
  const prelude = `(await import("node:v8")).setFlagsFromString(${JSON.stringify(LIFTOFF_ONLY_OPTION)});`;
  t.equal(hotTier([], prelude), "turbofan", "should a later V8 honour it, src/docker/undici-pool.ts can set it again for the npm package");
});
