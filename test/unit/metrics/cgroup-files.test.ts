/**
 * Parsers of the cgroup and mount files the metrics and resize code read:
 * block I/O (v1 and v2), cpu.max, the cpu.weight ⇄ shares mapping, the
 * mount source of a directory, and the resources reported as in force.
 */
import t from "tap";
import { parseBlkioV1, parseIoStatV2 } from "../../../src/stats/cgroup-detail.ts";
import { parseCpuMax, sharesToWeight, sharesToWeightLog, weightToShares } from "../../../src/stats/cgroup-limits.ts";
import { mountSourceOf } from "../../../src/stats/mount-device.ts";
import { EMPTY_RESOURCES, dockerResources, resourcesFromHostConfig, resourcesInForce, validateResources } from "../../../src/runtime/container/resources.ts";

t.test("blkio v1 and io.stat v2", async (t) => {
  const bytes = "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 1\n8:0 Total 12288\nTotal 12288\n";
  const ops = "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n";
  t.same(parseBlkioV1(bytes, ops), [
    {
      device: "8:0",
      readBytes: 4096n,
      writeBytes: 8192n,
      reads: 1n,
      writes: 2n,
      // Every operation of io_service_bytes, as cAdvisor's blkio device usage reports them; the grand "Total" line is no device's.
      serviceBytes: [
        { op: "Read", value: 4096n },
        { op: "Write", value: 8192n },
        { op: "Sync", value: 1n },
        { op: "Total", value: 12288n },
      ],
    },
  ]);
  t.same(parseBlkioV1("", ""), []);
  t.same(parseIoStatV2("8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n253:0 rbytes=5 wbytes=0 rios=1 wios=0\n"), [
    { device: "8:0", readBytes: 10n, writeBytes: 20n, reads: 1n, writes: 2n, serviceBytes: [{ op: "Read", value: 10n }, { op: "Write", value: 20n }] },
    { device: "253:0", readBytes: 5n, writeBytes: 0n, reads: 1n, writes: 0n, serviceBytes: [{ op: "Read", value: 5n }, { op: "Write", value: 0n }] },
  ]);
});

t.test("cpu.max and cpu.weight", async (t) => {
  t.same(parseCpuMax("max 100000"), { quota: 0n, period: 100000n });
  t.same(parseCpuMax("20000 100000"), { quota: 20000n, period: 100000n });
  for (const shares of [2n, 512n, 1024n, 1536n, 262144n]) {
    t.equal(sharesToWeight(weightToShares(sharesToWeight(shares))), sharesToWeight(shares), `weight of ${shares} round-trips`);
  }
  t.equal(weightToShares(1n), 2n);
  t.equal(weightToShares(10000n), 262144n);
  // runc 1.3.2 and later: values its Go conversion gives.
  for (const [shares, weight] of [[0n, 0n], [2n, 1n], [102n, 17n], [1024n, 100n], [1536n, 138n], [262144n, 10000n], [300000n, 10000n]] as const) {
    t.equal(sharesToWeightLog(shares), weight, `new runc: ${shares} shares are weight ${weight}`);
  }
});

t.test("mount source of a directory: the longest mount point wins", async (t) => {
  const info = [
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
    "30 22 8:2 / /var/lib/docker rw,relatime shared:2 - xfs /dev/sdb1 rw",
    "31 22 0:5 / /var/lib/docker\\040x rw - tmpfs tmpfs rw",
  ].join("\n");
  t.equal(mountSourceOf(info, "/var/lib/docker"), "/dev/sdb1");
  t.equal(mountSourceOf(info, "/var/lib/docker/overlay2"), "/dev/sdb1");
  t.equal(mountSourceOf(info, "/var/lib/dockerd"), "/dev/sda1", "a prefix that is not a path component does not match");
  t.equal(mountSourceOf(info, "/var/lib/docker x/y"), "tmpfs", "escaped spaces");
});

t.test("resources: pids.max through unified, in-force values from the cgroup", async (t) => {
  const spec = { ...EMPTY_RESOURCES, memoryLimitInBytes: 64n << 20n, unified: { "pids.max": "50" } };
  validateResources(spec);
  t.match(dockerResources(spec, 1).docker, { Memory: 64 << 20, MemorySwap: 64 << 20, PidsLimit: 50 });
  t.equal(dockerResources({ ...EMPTY_RESOURCES, unified: { "pids.max": "max" } }, 2).docker.PidsLimit, -1);
  t.throws(() => dockerResources({ ...EMPTY_RESOURCES, unified: { "pids.max": "-3" } }, 2), { code: "INVALID_ARGUMENT" });
  t.throws(() => dockerResources({ ...EMPTY_RESOURCES, unified: { "memory.high": "1" } }, 1), { code: "UNIMPLEMENTED" });

  const docker = resourcesFromHostConfig({ CpuShares: 1536, CpuQuota: 20000, CpuPeriod: 100000, Memory: 128 << 20, PidsLimit: 50 });
  t.same(docker.unified, { "pids.max": "50" });
  const limits = { cpuShares: 1536n, cpuQuota: 30000n, cpuPeriod: 100000n, memoryLimit: 256n << 20n, cpusetCpus: "0-1", cpusetMems: "0", pidsLimit: 40n };
  const inForce = resourcesInForce(docker, limits);
  t.equal(inForce.cpuQuota, 30000n, "the cgroup wins");
  t.equal(inForce.memoryLimitInBytes, 256n << 20n);
  t.equal(inForce.cpusetCpus, "", "no cpuset reported when none was set");
  t.same(inForce.unified, { "pids.max": "40" });
  // cgroup v2 stores a weight: shares runc turned into it, old runc or new, are kept as Docker has them.
  const v2 = (weight: bigint) => ({ ...limits, cpuShares: weightToShares(weight), cpuWeight: weight });
  t.equal(resourcesInForce(docker, v2(sharesToWeight(1536n))).cpuShares, 1536n, "runc 1.1's weight");
  t.equal(resourcesInForce(docker, v2(sharesToWeightLog(1536n))).cpuShares, 1536n, "runc 1.3.2's weight");
  t.equal(resourcesInForce(docker, v2(500n)).cpuShares, weightToShares(500n), "a weight set otherwise is reported");
  t.equal(resourcesInForce(docker, undefined), docker);
});
