/**
 * scripts/e2e-spec-list.ts: the CI's fixed list of e2e specs becomes a
 * ginkgo focus that matches exactly those names, and a listed spec the run
 * did not show is reported rather than dropped.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { focusRegex, missingSpecs, parseSpecList } from "../../scripts/e2e-spec-list.ts";

const PROJECT_LIST = fileURLToPath(new URL("../cluster/e2e-conformance.txt", import.meta.url));

t.test("names one a line; comments, blanks and trailing notes dropped; a duplicate refused", async (t) => {
  t.same(parseSpecList("# header\n\n[sig-node] Pods a [Conformance]\n  [sig-x] b  # why\n", "l.txt"), ["[sig-node] Pods a [Conformance]", "[sig-x] b"]);
  t.throws(() => parseSpecList("a\nb\na\n", "l.txt"), /l\.txt:3: "a" is listed twice/);
  t.throws(() => parseSpecList("# nothing\n", "l.txt"), /l\.txt names no spec/);
});

t.test("the focus matches each listed name literally, and nothing that merely looks like it", async (t) => {
  const names = [
    '[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe [NodeConformance] [Conformance]',
    "[sig-storage] EmptyDir volumes should support (non-root,0666,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]",
    "[sig-node] Pod InPlace Resize 3 containers - increase cpu & mem on c1, c2 [MinimumKubeletVersion:1.34] [Conformance]",
  ];
  const focus = new RegExp(focusRegex(names));
  for (const name of names) t.match(name, focus, name);
  // Unescaped, "[Conformance]" would be a character class and "(non-root,0666,tmpfs)" a group.
  t.notMatch("[sig-storage] EmptyDir volumes should support non-root,0666,tmpfs [LinuxOnly] [NodeConformance] C", focus);
  t.notMatch("[sig-node] Probing container should be restarted with a exec cat /tmp/health liveness probe", focus);
});

t.test("a listed spec the run did not show is missing", async (t) => {
  const tsv = "passed\t[sig-a] one\nfailed\t[sig-a] two\nskipped\t[sig-a] three\nnot-run\t[sig-a] four\n";
  t.same(missingSpecs(["[sig-a] one", "[sig-a] two", "[sig-a] three"], tsv), []);
  t.same(missingSpecs(["[sig-a] one", "[sig-a] four", "[sig-a] renamed"], tsv), ["[sig-a] four", "[sig-a] renamed"]);
});

t.test("the project's list parses, and names only [Conformance] specs that are not [Serial] or [Slow]", async (t) => {
  const names = parseSpecList(readFileSync(PROJECT_LIST, "utf8"), PROJECT_LIST);
  t.ok(names.length > 0);
  for (const name of names) {
    t.match(name, /\[Conformance\]/, name);
    t.notMatch(name, /\[(Serial|Slow|Disruptive)\]/, name);
  }
});
