/**
 * What `cridock check` says of the JavaScript runtime cridock runs on: the
 * executable's own Node, a Node the operator installed (the npm package),
 * or Deno. An operator reads it to know which runtime's security releases
 * the node depends on.
 */
import process from "node:process";
import { isSelfContained } from "../self-command.ts";
import type { NodeFacts } from "./evaluate.ts";

export function probeRuntime(): NodeFacts["runtime"] {
  const deno = (globalThis as { Deno?: { version?: { deno?: string; v8?: string } } }).Deno;
  if (deno !== undefined) return { name: "deno", version: deno.version?.deno ?? "unknown", v8: deno.version?.v8 ?? process.versions.v8 ?? "unknown", path: process.execPath, selfContained: false };
  return { name: "node", version: process.version, v8: process.versions.v8, path: process.execPath, selfContained: isSelfContained() };
}
