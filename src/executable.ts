/**
 * The entry of the self-contained executable (scripts/build/binary.ts): Node's
 * single executable application runs one CommonJS script, which cannot await
 * at its top level, and whose module URL is not a file, so main.ts's own
 * "am I the entry" test does not apply. The arguments after the executable's
 * own path are cridock's.
 */
import { main } from "./main.ts";
import { runningAsExecutable } from "./network/spawn-channel.ts";

// process.execPath is this executable, which runs cridock whatever its arguments: no `node -e` helper.
runningAsExecutable();

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`cridock: fatal: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
