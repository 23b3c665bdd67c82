import t from "tap";
import { pack } from "tar-stream";
import { Readable } from "node:stream";
import { createContext, type ContextDeps } from "../../../../src/runtime/container/create-context.ts";
import { createBody } from "../../../../src/runtime/container/create.ts";
import { firstRegularFile } from "../../../../src/runtime/image-files.ts";
import type { ContainerSpec, MountSpec, SecuritySpec } from "../../../../src/runtime/container/spec.ts";
import type { SandboxView } from "../../../../src/runtime/sandbox/view.ts";

const spec = (over: Partial<ContainerSpec> = {}): ContainerSpec => ({
  name: "app", attempt: 0, image: "img:1", command: [], args: [], workingDir: "", envs: [], mounts: [], devices: [],
  cdiDevices: [], labels: {}, annotations: {}, logPath: "", stdin: false, stdinOnce: false, tty: false, stopSignal: "", ...over,
});
const security = (over: Partial<SecuritySpec> = {}): SecuritySpec => ({
  privileged: false, capAdd: [], capDrop: [], capAddAmbient: [], pidMode: "pod", targetId: "",
  runAsUsername: "", readonlyRootfs: false, supplementalGroups: [], supplementalGroupsStrict: false,
  noNewPrivs: false, maskedPaths: [], readonlyPaths: [], ...over,
});
const imageMount = (over: Partial<MountSpec> = {}): MountSpec => ({
  containerPath: "/data", hostPath: "", readonly: true, selinuxRelabel: false, propagation: "private",
  recursiveReadOnly: false, image: "content:1", imageSubPath: "", ...over,
});
const view: SandboxView = {
  id: "f".repeat(64), metadata: { name: "pod", namespace: "ns", uid: "u1", attempt: 0 }, ready: true, pid: 1,
  logDirectory: "", cgroupParent: "", hostNetwork: false, hostPid: false, hostIpc: false,
  runtimeHandler: "", netnsPath: "", ips: [], sysctls: {}, privileged: false,
};

/** An engine and images of our choosing; records what was asked. */
function deps(engine: { api: string; version: string; cdiDirs?: string[] }, files: Record<string, string> = {}) {
  const asked: string[] = [];
  const d: ContextDeps = {
    docker: {
      apiVersion: async () => engine.api,
      version: async () => ({ Version: engine.version, ApiVersion: engine.api }) as never,
      info: async () => ({ ServerVersion: engine.version, CDISpecDirs: engine.cdiDirs, SecurityOptions: [] }) as never,
    },
    images: {
      resolveImage: async (ref) => {
        asked.push(`resolve ${ref}`);
        if (ref === "absent:1") throw Object.assign(new Error(`image ${ref} is not present; pull it first`), { code: "NOT_FOUND" });
        return { id: `sha256:${ref.replace(/\W/g, "")}` };
      },
    },
    files: {
      readText: async (id, path) => {
        asked.push(`read ${id} ${path}`);
        return files[`${id}${path}`];
      },
      exists: async (id, path) => {
        asked.push(`exists ${id} ${path}`);
        return `${id}${path}` in files;
      },
    },
  };
  return { d, asked };
}

const ENGINE29 = { api: "1.48", version: "29.0.0", cdiDirs: ["/etc/cdi", "/var/run/cdi"] };
const ENGINE2010 = { api: "1.41", version: "20.10.24" };

t.test("image volumes: resolved to ids, sub-paths checked, old engines refused", async (t) => {
  const { d, asked } = deps(ENGINE29, { "sha256:content1/sub": "" });
  const s = spec({ mounts: [imageMount(), imageMount({ containerPath: "/again", imageSubPath: "sub" })] });
  const context = await createContext(s, { id: "sha256:app" }, d);
  t.same([...context.imageMountIds], [["content:1", "sha256:content1"]]);
  t.same(asked, ["resolve content:1", "exists sha256:content1 /sub"], "one resolve for the image mounted twice");
  const body = await createBody(s, view, "sha256:app", "", { logMaxSize: "1m", logMaxFile: 2 }, context);
  t.same(body.HostConfig?.Mounts, [
    { Type: "image", Source: "sha256:content1", Target: "/data", ReadOnly: true },
    { Type: "image", Source: "sha256:content1", Target: "/again", ReadOnly: true, ImageOptions: { Subpath: "sub" } },
  ]);
  t.same(body.HostConfig?.Binds, [], "no bind for an image volume");

  await t.rejects(createContext(spec({ mounts: [imageMount({ imageSubPath: "missing" })] }), { id: "sha256:app" }, d), {
    code: "FAILED_PRECONDITION",
    message: /image_sub_path "missing" does not exist in image content:1/,
  });
  await t.rejects(createContext(spec({ mounts: [imageMount({ image: "absent:1" })] }), { id: "sha256:app" }, d), { code: "NOT_FOUND" });
  const old = deps(ENGINE2010);
  await t.rejects(createContext(spec({ mounts: [imageMount()] }), { id: "sha256:app" }, old.d), {
    code: "FAILED_PRECONDITION",
    message: /Engine API 1\.48.*Docker 20\.10\.24 with Engine API 1\.41/,
  });
  t.same(old.asked, [], "nothing resolved on an engine that cannot mount images");
});

t.test("CDI devices: device requests where the engine's CDI is on, FAILED_PRECONDITION elsewhere", async (t) => {
  const s = spec({ cdiDevices: ["cridock.test/null=null0"] });
  const context = await createContext(s, { id: "sha256:app" }, deps(ENGINE29).d);
  const body = await createBody(s, view, "sha256:app", "", { logMaxSize: "1m", logMaxFile: 2 }, context);
  t.same(body.HostConfig?.DeviceRequests, [{ Driver: "cdi", DeviceIDs: ["cridock.test/null=null0"] }]);
  await t.rejects(createContext(s, { id: "sha256:app" }, deps(ENGINE2010).d), { code: "FAILED_PRECONDITION", message: /20\.10\.24/ });
  const plain = await createBody(spec(), view, "sha256:app", "", { logMaxSize: "1m", logMaxFile: 2 }, await createContext(spec(), { id: "x" }, deps(ENGINE2010).d));
  t.equal(plain.HostConfig?.DeviceRequests, undefined, "no device requests when none are asked for");
});

t.test("Strict: user:group from the request or the image's /etc/passwd; Merge leaves Docker's lookup alone", async (t) => {
  const passwd = { "sha256:app/etc/passwd": "root:x:0:0::/root:/bin/sh\ndefault-user:x:1000:1000::/home:/bin/sh\n" };
  const strict = (over: Partial<SecuritySpec>) => spec({ security: security({ supplementalGroupsStrict: true, supplementalGroups: [1234n], ...over }) });
  const { d, asked } = deps(ENGINE2010, passwd);
  const s = strict({ runAsUser: 1000n });
  const context = await createContext(s, { id: "sha256:app", user: "default-user" }, d);
  t.equal(context.user, "1000:1000");
  const body = await createBody(s, view, "sha256:app", "", { logMaxSize: "1m", logMaxFile: 2 }, context);
  t.equal(body.User, "1000:1000");
  t.same(body.HostConfig?.GroupAdd, ["1234"], "the pod's supplemental groups");
  t.same(asked, ["read sha256:app /etc/passwd"]);

  t.equal((await createContext(strict({}), { id: "sha256:app", user: "default-user" }, d)).user, "default-user:1000", "the image's USER");
  t.equal((await createContext(strict({ runAsUser: 1n, runAsGroup: 2n }), { id: "sha256:app" }, d)).user, "1:2");
  t.equal((await createContext(strict({}), { id: "sha256:app" }, d)).user, "0:0", "root when nothing names a user");
  const merge = spec({ security: security({ runAsUser: 1000n }) });
  const mergeContext = await createContext(merge, { id: "sha256:app" }, d);
  t.equal(mergeContext.user, undefined);
  t.equal((await createBody(merge, view, "sha256:app", "", { logMaxSize: "1m", logMaxFile: 2 }, mergeContext)).User, "1000", "Merge: Docker adds the image's groups");
});

t.test("firstRegularFile reads the archive's file and nothing else", async (t) => {
  const tarOf = async (entries: { name: string; type?: "file" | "symlink"; body?: string; linkname?: string }[]) => {
    const p = pack();
    for (const e of entries) p.entry({ name: e.name, type: e.type ?? "file", linkname: e.linkname }, e.body ?? "");
    p.finalize();
    const chunks: Buffer[] = [];
    for await (const c of p) chunks.push(c as Buffer);
    return Readable.from([Buffer.concat(chunks)]);
  };
  t.equal(await firstRegularFile(await tarOf([{ name: "passwd", body: "root:x:0:0::/:/bin/sh\n" }])), "root:x:0:0::/:/bin/sh\n");
  t.equal(await firstRegularFile(await tarOf([{ name: "passwd", type: "symlink", linkname: "/x" }])), undefined);
  t.equal(await firstRegularFile(await tarOf([])), undefined);
  await t.rejects(firstRegularFile(await tarOf([{ name: "passwd", body: "x".repeat(2 << 20) }])), /more than the 1048576 read/, "a huge file is not read into memory");
});
