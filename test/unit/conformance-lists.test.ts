/**
 * The focus and skip lists of test/conformance decide which critest specs
 * run: comments stay comments, every skip carries its reason, and the
 * project's own files parse.
 */
import t from "tap";
import { fileURLToPath } from "node:url";
import { ginkgoFlags, skipsForEngine, parseFocus, parseSkip, readFocusDir, readSkipFile } from "../conformance/spec-lists.ts";

const CONFORMANCE_DIR = fileURLToPath(new URL("../conformance/", import.meta.url));

t.test("focus: one regex per line, comments and blanks ignored", async (t) => {
  const patterns = parseFocus("# header\n\n\\[k8s\\.io\\] Runtime info\n  PodSandbox should   # trailing note\n", "focus/x.txt");
  t.same(
    patterns.map((p) => p.regex),
    ["\\[k8s\\.io\\] Runtime info", "PodSandbox should"],
  );
  t.equal(patterns[1]!.source, "focus/x.txt:4", "each pattern knows its line");
});

t.test("skip: a reason is required", async (t) => {
  t.same(parseSkip("AppArmor  # no AppArmor here\n", "skip.txt"), [
    { regex: "AppArmor", source: "skip.txt:1", reason: "no AppArmor here" },
  ]);
  t.throws(() => parseSkip("AppArmor\n", "skip.txt"), /skip\.txt:1: a skip needs a reason/);
});

t.test("skip: a line may be limited to one engine by its version prefix", async (t) => {
  const skip = parseSkip("[docker 20.10] Privileged  # 20.10 cannot\nAppArmor  # nowhere\n", "skip.txt");
  t.same(skip[0], { regex: "Privileged", source: "skip.txt:1", reason: "20.10 cannot", engine: "20.10" });
  t.same(skipsForEngine(skip, "20.10.24+dfsg1").map((p) => p.regex), ["Privileged", "AppArmor"]);
  t.same(skipsForEngine(skip, "29.8.0").map((p) => p.regex), ["AppArmor"]);
  t.throws(() => parseSkip("[docker] X  # why\n", "skip.txt"), /skip\.txt:1: an engine condition reads/);
});

t.test("a broken regex is reported with its file and line", async (t) => {
  t.throws(() => parseFocus("ok\n[unclosed\n", "focus/images.txt"), /focus\/images\.txt:2: "\[unclosed" is not a valid regex/);
});

t.test("each pattern becomes its own ginkgo flag", async (t) => {
  const flags = ginkgoFlags(parseFocus("a b\nc\n", "f"), parseSkip("d  # why\n", "s"));
  t.same(flags, ["-ginkgo.focus=a b", "-ginkgo.focus=c", "-ginkgo.skip=d"]);
});

t.test("the project's focus files and skip list parse", async (t) => {
  const focus = await readFocusDir(`${CONFORMANCE_DIR}focus`);
  t.ok(focus.some((p) => p.regex.includes("Runtime info")), "the runtime info specs are focused");
  const skip = await readSkipFile(`${CONFORMANCE_DIR}skip.txt`);
  t.ok(skip.every((p) => p.reason), "every skip has a reason");
});
