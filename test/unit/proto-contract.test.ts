// The project's proto must declare exactly what k8s.io/cri-api v0.37.2 does:
// every message, field (name, number, type, label, map key), enum value,
// service, method and streaming flag. Comments and file options may differ.
import t from "tap";
import { readFileSync } from "node:fs";
import protobuf from "protobufjs";
import { PROTO_PATH, methodNames } from "../../src/cri/proto.ts";
import { upstreamProtoPath, CRI_API_VERSION } from "../helpers/upstream-proto.ts";

function declarations(path: string | URL): Record<string, unknown> {
  const root = protobuf.parse(readFileSync(path, "utf8"), { keepCase: true }).root;
  const ns = root.lookup("runtime.v1") as protobuf.Namespace;
  return (ns.toJSON() as { nested: Record<string, unknown> }).nested;
}

const upstream = upstreamProtoPath();

t.test(`proto/runtime/v1/api.proto matches cri-api ${CRI_API_VERSION}`, { skip: upstream ? false : "Go is not installed, so the upstream proto cannot be fetched" }, async (t) => {
  const ours = declarations(PROTO_PATH);
  const theirs = declarations(upstream!);
  t.same(Object.keys(ours).sort(), Object.keys(theirs).sort(), "the same top-level declarations");
  for (const name of Object.keys(theirs)) {
    t.same(ours[name], theirs[name], `${name} is declared identically`);
  }
});

t.test("the services have the 37 + 6 RPCs of CRI v1", async (t) => {
  t.equal(methodNames("RuntimeService").length, 37);
  t.equal(methodNames("ImageService").length, 6);
});
