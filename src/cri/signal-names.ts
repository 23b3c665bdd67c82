/**
 * CRI's Signal enum ⇄ the signal names Docker and OCI images use.
 *
 * cri-api v0.37 renamed every Signal value with a `SIGNAL_` prefix
 * (`SIGTERM` became `SIGNAL_SIGTERM`, `RUNTIME_DEFAULT` became
 * `SIGNAL_RUNTIME_DEFAULT`) and kept the numbers, so only text changes:
 * the wire carries numbers. Wherever a name is read, both spellings are
 * taken (a client built on v0.36 writes `SIGTERM`, one built on v0.37
 * `SIGNAL_SIGTERM`), and Docker's own forms too (`TERM`, `SIGRTMIN+1`);
 * what goes to Docker is always Docker's name.
 */
import type * as cri from "./proto-types.ts";
import { Signal } from "./proto-types.ts";

/** cri-api v0.37's prefix on every Signal value name. */
const PREFIX = "SIGNAL_";

/** The enum's name without the prefix, in Docker's spelling: SIGNAL_SIGRTMINPLUS1 → SIGRTMIN+1. */
function dockerSpelling(key: string): string {
  return key
    .replace(/^SIGNAL_/, "")
    .replace(/PLUS(\d+)$/, "+$1")
    .replace(/MINUS(\d+)$/, "-$1");
}

const DOCKER_NAME = new Map<number, string>();
/** Docker's spelling (upper case, "SIG" kept) → the value; SIGCLD, SIGIOT and SIGPOLL keep values of their own, as in the enum. */
const BY_NAME = new Map<string, cri.Signal>();
for (const [key, value] of Object.entries(Signal)) {
  if (value === Signal.SIGNAL_RUNTIME_DEFAULT) continue;
  const name = dockerSpelling(key);
  DOCKER_NAME.set(value, name);
  if (!BY_NAME.has(name)) BY_NAME.set(name, value);
}

/** Docker's name for a CRI Signal value ("SIGTERM", "SIGRTMIN+1"); undefined for RUNTIME_DEFAULT and for a number the enum lacks. */
export function dockerSignalName(value: number): string | undefined {
  return DOCKER_NAME.get(value);
}

/**
 * The CRI value a signal name stands for, in any spelling: cri-api v0.37's
 * (`SIGNAL_SIGTERM`, `SIGNAL_SIGRTMINPLUS1`), v0.36's (`SIGTERM`,
 * `SIGRTMINPLUS1`), Docker's (`SIGTERM`, `TERM`, `SIGRTMIN+1`, any case).
 * RUNTIME_DEFAULT for "" and for `RUNTIME_DEFAULT` in either spelling;
 * undefined for a name that is no signal the enum has.
 */
export function signalFromName(text: string): cri.Signal | undefined {
  let name = text.trim().toUpperCase();
  if (name === "" || name === "RUNTIME_DEFAULT" || name === `${PREFIX}RUNTIME_DEFAULT`) return Signal.SIGNAL_RUNTIME_DEFAULT;
  if (name.startsWith(PREFIX)) name = name.slice(PREFIX.length);
  name = name.replace(/PLUS(\d+)$/, "+$1").replace(/MINUS(\d+)$/, "-$1");
  if (!name.startsWith("SIG")) name = `SIG${name}`;
  return BY_NAME.get(name);
}
