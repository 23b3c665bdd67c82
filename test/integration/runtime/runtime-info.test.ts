// Version, Status, RuntimeConfig, UpdateRuntimeConfig and ImageFsInfo over
// the real socket against the node's dockerd.
import t from "tap";
import { request } from "node:http";
import { statSync } from "node:fs";
import { startCridockProcess } from "../../helpers/cridock-process.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { TEST_DOCKER_SOCKET } from "../../helpers/env.ts";

function dockerGet<T>(path: string): Promise<T> {
  return new Promise((resolve, reject) => {
    request({ socketPath: TEST_DOCKER_SOCKET, path }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve(JSON.parse(body) as T));
    })
      .on("error", reject)
      .end();
  });
}

t.test("runtime info RPCs", async (t) => {
  const cridock = await startCridockProcess({ flags: ["--network-plugin=no-op"] });
  t.teardown(() => cridock.stop());
  const { client } = cridock;
  const dockerVersion = await dockerGet<{ Version: string }>("/version");
  const dockerInfo = await dockerGet<{ CgroupDriver: string; DockerRootDir: string }>("/info");

  t.test("Version answers what kubelet checks", async (t) => {
    const v = await client.call("Version", { version: "v1" });
    t.same(v, { version: "0.1.0", runtimeName: "docker", runtimeVersion: dockerVersion.Version, runtimeApiVersion: "v1" });
    // kubelet writes `<runtime_name>://<runtime_version>` into the node's containerRuntimeVersion, as with cri-dockerd.
    t.equal(`${v.runtimeName}://${v.runtimeVersion}`, `docker://${dockerVersion.Version}`);
  });

  t.test("Status: runtime and network ready, handlers listed", async (t) => {
    const s = await client.call("Status", { verbose: false });
    t.same(s.status.conditions.map((c: { type: string; status: boolean }) => [c.type, c.status]), [
      ["RuntimeReady", true],
      ["NetworkReady", true],
    ]);
    t.same(s.info, {}, "info only when verbose");
    t.ok(s.runtimeHandlers.some((h: { name: string }) => h.name === ""), "the default handler is listed");
    const verbose = await client.call("Status", { verbose: true });
    const config = JSON.parse(verbose.info.config);
    t.equal(config.listenSocket, cridock.socketPath, "verbose info carries the effective config");
    // kubeadm 1.36 reads the pause image from here and expects registry.k8s.io/pause:3.10.2.
    t.equal(config.sandboxImage, "registry.k8s.io/pause:3.10.2", "sandboxImage is the default pause image");
    const other = await startCridockProcess({ flags: ["--network-plugin=no-op", "--pod-infra-container-image=127.0.0.1:5000/x/pause:9"] });
    t.teardown(() => other.stop());
    const otherConfig = JSON.parse((await other.client.call("Status", { verbose: true })).info.config);
    t.equal(otherConfig.sandboxImage, "127.0.0.1:5000/x/pause:9", "sandboxImage is the configured pause image");
  });

  t.test("RuntimeConfig reports Docker's cgroup driver", async (t) => {
    const rc = await client.call("RuntimeConfig", {});
    t.equal(rc.linux.cgroupDriver, dockerInfo.CgroupDriver === "systemd" ? 0 : 1);
  });

  t.test("UpdateRuntimeConfig takes a pod CIDR and refuses garbage", async (t) => {
    t.same(await client.call("UpdateRuntimeConfig", { runtimeConfig: { networkConfig: { podCidr: "10.244.0.0/24" } } }), {});
    await t.rejects(client.call("UpdateRuntimeConfig", { runtimeConfig: { networkConfig: { podCidr: "not-a-cidr" } } }), {
      code: grpcStatus.INVALID_ARGUMENT,
      details: /not-a-cidr/,
    });
  });

  t.test("ImageFsInfo reports the filesystem of Docker's root", async (t) => {
    const before = BigInt(Date.now()) * 1_000_000n;
    const res = await client.imageCall("ImageFsInfo", {});
    const [fs] = res.imageFilesystems;
    t.equal(fs.fsId.mountpoint, dockerInfo.DockerRootDir);
    t.ok(fs.usedBytes.value > 0n, "used bytes");
    t.ok(fs.inodesUsed.value > 0n, "used inodes");
    t.ok(fs.timestamp >= before - 1_000_000_000n && fs.timestamp <= BigInt(Date.now()) * 1_000_000n, "timestamp is now, in ns");
  });

  t.test("CheckpointContainer, the last RPC cridock lacked, answers for itself", async (t) => {
    // test/integration/containers/checkpoint.test.ts checks its answers; here only that it is no longer the generic UNIMPLEMENTED.
    await t.rejects(client.call("CheckpointContainer", { containerId: "x" }), {
      code: grpcStatus.INVALID_ARGUMENT,
      details: /location is required/,
    });
  });

  t.test("the socket is 0660", async (t) => {
    t.equal(statSync(cridock.socketPath).mode & 0o777, 0o660);
  });
});
