/**
 * `cridock check [flags]`: the same flags as the server, so it inspects the
 * configuration cridock would run with; prints one line per item and exits
 * 1 when cridock could not serve pods, 2 on bad flags, 0 otherwise.
 */
import process from "node:process";
import { ConfigError, parseConfig } from "../config.ts";
import { createLogger } from "../log.ts";
import { evaluate, exitCode, formatItems } from "./evaluate.ts";
import { probeNode } from "./probes.ts";
import { versionLine } from "../version.ts";

export async function runCheck(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseConfig(argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`cridock check: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (parsed.kind === "help") {
    process.stdout.write(`Usage: cridock check [flags]\n\nInspects this node for the configuration the same flags give the server; prints one line per item (OK, WARN, FAIL with the fix) and exits 1 if cridock could not serve pods.\n\n${parsed.text.split("\n").slice(4).join("\n")}\n`);
    return 0;
  }
  if (parsed.kind === "version") {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  // Probes log nothing worth showing unless asked; the report is the output.
  const log = createLogger(argv.some((a) => a.startsWith("--log-level")) ? parsed.config.logLevel : "error");
  const items = evaluate(await probeNode(parsed.config, log));
  process.stdout.write(formatItems(items) + "\n");
  const code = exitCode(items);
  process.stdout.write(code === 0 ? "cridock can serve pods on this node\n" : "cridock could not serve pods on this node: fix the FAIL lines above\n");
  return code;
}
