/**
 * The syntax of CRI's `unified` map (LinuxContainerResources.unified): each
 * key names a cgroup v2 interface file of a controller, each value is what
 * would be written into it. Every key and value comes from a request and is
 * treated as hostile: a key is a plain file name `<controller>.<name>` of
 * letters, digits, `_` and `.` (the controller in lower case; hugetlb's
 * files carry the page size, as in hugetlb.2MB.max), never a path (no `/`,
 * no `..`),
 * and never a core file (`cgroup.*`: the hierarchy's own controls, such as
 * cgroup.procs or cgroup.subtree_control, are not resources). Values are one
 * line of bounded length. Whether the kernel has such a file is decided
 * where the cgroup is known (runtime/container/unified-cgroup.ts).
 *
 * Shared by containers (UpdateContainerResources, CreateContainer) and pod
 * sandboxes (UpdatePodSandboxResources), which both take the map, and by the
 * OCI runtime layer (oci/spec-edits.ts), which checks the stored keys again
 * before it writes them into a container's config.json. Those live in two
 * areas, runtime/ above oci/, so the syntax sits at the top of src/, below
 * both, among the files every area may read.
 */
import { invalidArgument } from "./errors.ts";

/** Longest key taken: the kernel's interface file names are far shorter. */
const KEY_MAX = 64;
/** Longest value taken: one page is what a cgroup file write takes at once. */
export const UNIFIED_VALUE_MAX = 4096;
const KEY = /^[a-z0-9_]+\.[A-Za-z0-9_.]+$/;

/** Why `key` is not a cgroup v2 interface file name, or undefined when it is one. */
function keyProblem(key: string): string | undefined {
  if (key.length === 0) return "is empty";
  if (key.length > KEY_MAX) return `is longer than ${KEY_MAX} characters`;
  if (key.includes("/")) return "contains \"/\": a key names a file of the container's cgroup, never a path";
  if (!KEY.test(key)) return "is not <controller>.<name> of letters, digits, \"_\" and \".\" (the controller in lower case)";
  if (key.includes("..") || key.endsWith(".")) return "is not a file name (\"..\" or a trailing \".\")";
  if (key.startsWith("cgroup.")) return "is a core cgroup file, not a resource setting";
  return undefined;
}

/** Whether `key` is a cgroup v2 interface file name (for reads of stored keys, which skip the others). */
export function isUnifiedKey(key: string): boolean {
  return keyProblem(key) === undefined;
}

/** The controller a valid key belongs to: `memory` for `memory.oom.group`. */
export function controllerOf(key: string): string {
  return key.slice(0, key.indexOf("."));
}

/** A key or value quoted for a message: JSON escapes control characters, and long text is cut. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);
}

/** INVALID_ARGUMENT naming the key unless it is a cgroup v2 interface file name. */
export function checkUnifiedKey(key: string): void {
  const problem = keyProblem(key);
  if (problem) throw invalidArgument(`unified key ${quoted(key)} ${problem}`);
}

/** INVALID_ARGUMENT naming key and value unless the value is one non-empty line of bounded length. */
export function checkUnifiedValue(key: string, value: string): void {
  if (typeof value !== "string" || value.length === 0) throw invalidArgument(`unified ${key} has an empty value`);
  if (value.length > UNIFIED_VALUE_MAX) throw invalidArgument(`unified ${key} value is longer than ${UNIFIED_VALUE_MAX} characters`);
  // Newlines would write several settings at once; NUL and other controls end or garble the write.
  if (/[\x00-\x1f\x7f]/.test(value)) throw invalidArgument(`unified ${key} value ${quoted(value)} contains a newline, NUL or control character`);
}

/** Checks every key and value of a `unified` map (syntax only). */
export function validateUnified(unified: Readonly<Record<string, string>>): void {
  for (const [key, value] of Object.entries(unified)) {
    checkUnifiedKey(key);
    checkUnifiedValue(key, value);
  }
}
