/**
 * The focus and skip lists that choose which critest specs run. Focus files
 * (focus/*.txt, one per area) hold one Go regex per line; skip.txt holds a
 * regex and a reason per line ("regex  # reason"), optionally for one engine
 * only ("[docker 20.10] regex  # reason": applies when the engine's version,
 * as dockerd reports it, starts with 20.10). Lines starting with # and
 * blank lines are comments. Each regex becomes its own -ginkgo.focus or
 * -ginkgo.skip flag: Ginkgo ORs repeated flags, so no joining is needed.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

export interface SpecPattern {
  regex: string;
  /** Where the line came from, for error messages: "focus/images.txt:4". */
  source: string;
  reason?: string;
  /** Skip lines only: the engine version prefix this skip is limited to. */
  engine?: string;
}

/** "[docker 20.10] regex": a skip for the engines whose version starts with "20.10". */
const ENGINE_CONDITION = /^\[docker ([0-9][0-9A-Za-z.+~-]*)\]\s+/;

/** The separator between a regex and its reason; a lone # may be part of a regex. */
const REASON_SEPARATOR = /\s{2,}#\s?/;

function meaningfulLines(text: string, file: string): { line: string; source: string }[] {
  return text
    .split("\n")
    .map((raw, i) => ({ line: raw.trim(), source: `${file}:${i + 1}` }))
    .filter(({ line }) => line !== "" && !line.startsWith("#"));
}

/** Go's RE2 and JS regexes differ in corners, but a pattern JS rejects outright is almost surely a typo. */
function checkRegex(regex: string, source: string): void {
  try {
    new RegExp(regex.replace(/^\(\?i\)/, ""));
  } catch (err) {
    throw new Error(`${source}: "${regex}" is not a valid regex: ${(err as Error).message}`);
  }
}

export function parseFocus(text: string, file: string): SpecPattern[] {
  return meaningfulLines(text, file).map(({ line, source }) => {
    const regex = line.split(REASON_SEPARATOR)[0]!.trim();
    checkRegex(regex, source);
    return { regex, source };
  });
}

export function parseSkip(text: string, file: string): SpecPattern[] {
  return meaningfulLines(text, file).map(({ line, source }) => {
    const condition = ENGINE_CONDITION.exec(line);
    if (!condition && line.startsWith("[docker")) throw new Error(`${source}: an engine condition reads "[docker VERSION-PREFIX] regex  # reason"`);
    const [regex, ...rest] = line.slice(condition ? condition[0].length : 0).split(REASON_SEPARATOR);
    const reason = rest.join(" # ").trim();
    if (!reason) throw new Error(`${source}: a skip needs a reason: "regex  # why it is skipped"`);
    checkRegex(regex!.trim(), source);
    return { regex: regex!.trim(), source, reason, ...(condition ? { engine: condition[1]! } : {}) };
  });
}

/** The skips that apply on an engine of the given version (dockerd's "Version"). */
export function skipsForEngine(skip: SpecPattern[], engineVersion: string): SpecPattern[] {
  return skip.filter((p) => p.engine === undefined || engineVersion.startsWith(p.engine));
}

/** All focus patterns of all area files in a directory, files in name order. */
export async function readFocusDir(dir: string): Promise<SpecPattern[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".txt")).sort();
  const patterns: SpecPattern[] = [];
  for (const file of files) patterns.push(...parseFocus(await readFile(join(dir, file), "utf8"), `focus/${file}`));
  return patterns;
}

export async function readSkipFile(path: string): Promise<SpecPattern[]> {
  return parseSkip(await readFile(path, "utf8"), "skip.txt");
}

export function ginkgoFlags(focus: SpecPattern[], skip: SpecPattern[]): string[] {
  return [...focus.map((p) => `-ginkgo.focus=${p.regex}`), ...skip.map((p) => `-ginkgo.skip=${p.regex}`)];
}
