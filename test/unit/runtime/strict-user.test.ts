import t from "tap";
import { needsPasswd, parsePasswd, requestedUser, strictUserString } from "../../../src/runtime/strict-user.ts";
import type { SecuritySpec } from "../../../src/runtime/container/spec.ts";

const security = (over: Partial<SecuritySpec> = {}): SecuritySpec => ({
  privileged: false, capAdd: [], capDrop: [], capAddAmbient: [], pidMode: "pod", targetId: "",
  runAsUsername: "", readonlyRootfs: false, supplementalGroups: [], supplementalGroupsStrict: true,
  noNewPrivs: false, maskedPaths: [], readonlyPaths: [], ...over,
});

const PASSWD = [
  "root:x:0:0:root:/root:/bin/sh",
  "# a comment",
  "broken line",
  "bad:x:abc:1::/:/bin/sh",
  "default-user:x:1000:1001::/home/default-user:/bin/sh",
  "",
].join("\n");

t.test("parsePasswd keeps well-formed entries only", async (t) => {
  t.same(parsePasswd(PASSWD), [
    { name: "root", uid: 0n, gid: 0n },
    { name: "default-user", uid: 1000n, gid: 1001n },
  ]);
});

t.test("the requested user: request first, then the image's USER, then root", async (t) => {
  t.same(requestedUser(security({ runAsUser: 1000n }), "www-data:5"), { user: "1000", group: undefined });
  t.same(requestedUser(security({ runAsUser: 1000n, runAsGroup: 7n }), undefined), { user: "1000", group: "7" });
  t.same(requestedUser(security({ runAsUsername: "app" }), "1:1"), { user: "app", group: undefined });
  t.same(requestedUser(security(), "www-data:staff"), { user: "www-data", group: "staff" });
  t.same(requestedUser(security(), "1002"), { user: "1002", group: undefined });
  t.same(requestedUser(security(), ""), { user: "0", group: undefined });
  t.same(requestedUser(security(), undefined), { user: "0", group: undefined });
  t.equal(needsPasswd({ user: "1000" }), true);
  t.equal(needsPasswd({ user: "1000", group: "7" }), false);
});

t.test("Strict always names a group, so Docker adds none from /etc/group", async (t) => {
  const passwd = parsePasswd(PASSWD);
  t.equal(strictUserString({ user: "1000", group: "7" }, passwd, "img"), "1000:7", "a named group is used as it is");
  t.equal(strictUserString({ user: "1000" }, passwd, "img"), "1000:1001", "the primary gid from the image's /etc/passwd");
  t.equal(strictUserString({ user: "default-user" }, passwd, "img"), "default-user:1001", "a user name is looked up too");
  t.equal(strictUserString({ user: "0" }, passwd, "img"), "0:0");
  t.equal(strictUserString({ user: "4242" }, passwd, "img"), "4242:0", "a uid the image does not list gets gid 0");
  t.equal(strictUserString({ user: "4242" }, undefined, "img"), "4242:0", "an image without /etc/passwd too");
  t.throws(() => strictUserString({ user: "nobody-here" }, passwd, "img"), { code: "FAILED_PRECONDITION", message: /nobody-here.*\/etc\/passwd of image img/ });
});
