/**
 * cri-dockerd's sandbox checkpoints: the checksum matches the values
 * cri-dockerd's own code computes (FNV-32a of go-spew "%#v" of
 * core.CheckpointData; the expected numbers were produced with go-spew), and
 * hostile files are refused with a message naming the field.
 */
import t from "tap";
import { fnv32a, formatCriDockerdCheckpoint, parseCriDockerdCheckpoint, spewCheckpointData } from "../../../src/store/cri-dockerd-checkpoint.ts";

t.test("checksums agree with go-spew's rendering", async (t) => {
  t.equal(fnv32a(""), 0x811c9dc5);
  t.equal(fnv32a(spewCheckpointData(undefined, false)), 2305795928);
  t.equal(fnv32a(spewCheckpointData(undefined, true)), 12315789);
  t.equal(fnv32a(spewCheckpointData([], false)), 3930330829);
  t.equal(fnv32a(spewCheckpointData([{ protocol: "tcp", containerPort: 80, hostPort: 8080, hostIp: "127.0.0.1" }], false)), 3406953414);
  t.equal(
    fnv32a(
      spewCheckpointData(
        [
          { protocol: "tcp", containerPort: 80, hostPort: 8080, hostIp: "" },
          { protocol: "udp", containerPort: 53, hostIp: "" },
        ],
        false,
      ),
    ),
    869833332,
  );
});

t.test("parse: a file as cri-dockerd writes it", async (t) => {
  const text =
    '{"version":"v1","name":"web","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":8080,"host_ip":"127.0.0.1"}]},"checksum":3406953414}';
  const c = parseCriDockerdCheckpoint("x", text);
  t.match(c, { name: "web", namespace: "default", hostNetwork: false, checksumValid: true });
  t.same(c.portMappings, [{ protocol: "tcp", containerPort: 80, hostPort: 8080, hostIp: "127.0.0.1" }]);
  const host = parseCriDockerdCheckpoint("x", '{"version":"v1","name":"n","namespace":"kube-system","data":{"host_network":true},"checksum":12315789}');
  t.match(host, { hostNetwork: true, checksumValid: true, portMappings: undefined });
  t.equal(parseCriDockerdCheckpoint("x", text.replace("8080", "8081")).checksumValid, false, "a damaged file fails the checksum");
  const round = parseCriDockerdCheckpoint("x", formatCriDockerdCheckpoint("a", "b", [{ protocol: "udp", containerPort: 53, hostIp: "" }], false));
  t.equal(round.checksumValid, true, "the test fixture writer agrees with the reader");
});

t.test("parse: hostile files", async (t) => {
  const bad = [
    ["not json", /not JSON/],
    ["[]", /not a JSON object/],
    ['{"version":"v2","name":"a","namespace":"b","checksum":1}', /unknown version/],
    ['{"version":"v1","name":"","namespace":"b","checksum":1}', /non-empty/],
    ['{"version":"v1","name":"a","namespace":"b","data":{"port_mappings":{}},"checksum":1}', /not a list/],
    ['{"version":"v1","name":"a","namespace":"b","data":{"port_mappings":[{"protocol":"icmp"}]},"checksum":1}', /protocol/],
    ['{"version":"v1","name":"a","namespace":"b","data":{"port_mappings":[{"host_port":99999}]},"checksum":1}', /host_port/],
    ['{"version":"v1","name":"a","namespace":"b","data":{"host_network":"yes"},"checksum":1}', /host_network/],
    ['{"version":"v1","name":"a","namespace":"b","checksum":"x"}', /checksum/],
  ] as const;
  for (const [text, message] of bad) t.throws(() => parseCriDockerdCheckpoint("p", text), { message }, text);
});
