/**
 * The entry of the self-contained executable (scripts/build/binary.ts): Node's
 * single executable application runs one CommonJS script, which cannot await
 * at its top level, and whose module URL is not a file, so main.ts's own
 * "am I the entry" test does not apply. The arguments after the executable's
 * own path are cridock's.
 *
 * `cridock oci-edit` runs on the start of every container under the OCI
 * runtime layer (src/oci/launcher.ts): it loads its own few modules, not the
 * server's (the bundle evaluates a dynamically imported module only when
 * it is imported).
 */
import process from "node:process";
import { markSelfContained } from "./self-command.ts";

// process.execPath is this executable, which runs cridock whatever its arguments: no `node -e` helper.
markSelfContained();

const args = process.argv.slice(2);
const run: Promise<number> =
  args[0] === "oci-edit" ? import("./oci/edit-command.ts").then((m) => m.runOciEdit(args.slice(1))) : import("./main.ts").then((m) => m.main(args));

run.then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`cridock: fatal: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
