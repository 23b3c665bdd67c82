#!/usr/bin/env node
// Runs cridock on Node. With the prebuilt bundle dist/cridock.js present (scripts/build/bundle.ts; npm's
// prepack builds it) and not older than the sources, it runs that: it starts faster and takes less
// memory than transpiling the sources. Otherwise (development, or CRIDOCK_FROM_SOURCE=1) it runs the
// TypeScript sources through tsx, with no build step.
import { readdirSync, statSync } from "node:fs";

const root = new URL("../", import.meta.url);

/** Newest modification time under `dir` (sources and the proto the bundle reads). */
function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = new URL(entry.name + (entry.isDirectory() ? "/" : ""), dir);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/**
 * An installed package (under a node_modules folder: npm's global or local
 * install) is never rebuilt, so its bundle is its code whatever the files'
 * times say: npm 11 (Node 24 and later) stamps each file with the time it
 * unpacked it, and the sources, unpacked after the bundle, looked newer.
 */
const installed = new URL(".", root).pathname.split("/").includes("node_modules");

function bundleIsCurrent() {
  if (process.env.CRIDOCK_FROM_SOURCE === "1") return false;
  let built;
  try {
    built = statSync(new URL("dist/cridock.js", root)).mtimeMs;
  } catch {
    return false;
  }
  return installed || built >= newest(new URL("src/", root));
}

let main;
if (bundleIsCurrent()) {
  ({ main } = await import("../dist/cridock.js"));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/main.ts"));
}
process.exit(await main(process.argv.slice(2)));
