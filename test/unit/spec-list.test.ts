/**
 * scripts/k8s/spec-list.ts: a fixed list of e2e specs becomes a focus regex
 * that matches exactly those spec names, and a run is counted against the
 * list so that a listed spec that never ran, or a spec run outside the list,
 * is a failure.
 */
import t from "tap";
import { countAgainstList, focusRegex, parseSpecList } from "../../scripts/k8s/spec-list.ts";
import type { SpecResult } from "../../scripts/k8s/conformance-results.ts";

const POD = "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]";
const SC = "[sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]";

t.test("a list: one full spec name a line, comments and blanks ignored, no duplicates", async (t) => {
  t.same(parseSpecList(`# the CI part\n\n${POD}\n  ${SC}  \n`, "ci.txt"), [POD, SC]);
  t.throws(() => parseSpecList(`${POD}\n${POD}\n`, "ci.txt"), /ci\.txt:2: .* is listed twice/);
  t.throws(() => parseSpecList("# nothing\n", "ci.txt"), /ci\.txt lists no spec/);
});

t.test("the focus regex matches each listed name whole and nothing else", async (t) => {
  const re = new RegExp(focusRegex([POD, SC]));
  t.ok(re.test(POD));
  t.ok(re.test(SC));
  t.ok(re.test(`E2eNode Suite ${POD}`), "after the suite's description, as ginkgo matches");
  // Brackets, dots and parentheses are literal, not classes or groups.
  t.notOk(re.test(POD.replace("[Conformance]", "C")), "[Conformance] is not a character class");
  t.notOk(re.test(`${POD} and more`), "a longer name does not match");
  t.notOk(re.test(`prefix${SC}`), "nor a name that contains it");
  const special = "[sig-storage] EmptyDir volumes should support (root,0666,tmpfs) [LinuxOnly] a.b+c*d?e|f{1}^$\\";
  t.ok(new RegExp(focusRegex([special])).test(special));
  t.notOk(new RegExp(focusRegex([special])).test(special.replace("a.b", "aXb")));
});

t.test("counts: as the run says for listed specs; missing or extra specs fail", async (t) => {
  const results: SpecResult[] = [
    { name: POD, outcome: "passed", detail: "" },
    { name: SC, outcome: "failed", detail: "Timed out (x.go:1)" },
    { name: "[sig-node] skipped itself", outcome: "skipped", detail: "no AppArmor" },
    { name: "[sig-node] outside the focus", outcome: "not-run", detail: "" },
    { name: "[sig-node] ran but unlisted", outcome: "passed", detail: "" },
    { name: "[SynchronizedBeforeSuite] E2eNode Suite", outcome: "failed", detail: "etcd did not start" },
  ];
  const counts = countAgainstList([POD, SC, "[sig-node] skipped itself", "[sig-node] renamed upstream"], results);
  t.equal(counts.passed, 1);
  t.equal(counts.skipped, 1);
  t.equal(counts.failed, 4);
  t.same(counts.failures, [
    `${SC}: Timed out (x.go:1)`,
    "[sig-node] renamed upstream: did not run",
    "[sig-node] ran but unlisted: passed outside the list",
    "[SynchronizedBeforeSuite] E2eNode Suite: failed outside the list: etcd did not start",
  ]);
});
