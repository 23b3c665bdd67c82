// A pod that asks for its own user namespace (KEP-127) where the node
// cannot give one, on this host's real dockerd: Status says so for the
// default handler, RunPodSandbox refuses with FAILED_PRECONDITION naming
// what the node lacks (never a pod whose root is the host's), bad mappings
// are INVALID_ARGUMENT before anything is created, and a container cannot
// ask for a namespace its pod does not have. Nothing is left behind.
// Where the node can, test/vm/pods.test.ts runs such a pod under kubelet.
import t from "tap";
import { BUSYBOX_IMAGE } from "../../helpers/env.ts";
import { grpcStatus } from "../../helpers/cri-client.ts";
import { assertNoLeaks, docker, podConfig, removePod, startSandboxEnv } from "./helpers.ts";

const RANGE = [{ hostId: 65536 * 9, containerId: 0, length: 65536 }];
const POD_USERNS = { mode: 0 /* POD */, uids: RANGE, gids: RANGE };
const withUserns = (name: string, userns: Record<string, unknown>) =>
  podConfig(name, { linux: { securityContext: { namespaceOptions: { network: 0, pid: 1, ipc: 0, usernsOptions: userns } } } });

t.test("user namespaces where the node cannot give them: refused, named, nothing left", async (t) => {
  const env = await startSandboxEnv(t);
  const client = env.cridock.client;
  const status = await client.call("Status", {});
  const handler = (status.runtimeHandlers as { name: string; features?: { userNamespaces?: boolean } }[]).find((h) => h.name === "");
  if (handler?.features?.userNamespaces) {
    t.plan(0, "this node can give pods their own user namespace (util-linux 2.39, Linux 6.3, the layer): the refusal is not for it");
    return;
  }
  t.notOk(handler?.features?.userNamespaces, "the default handler says it has no user namespaces");

  const refused = await client.call("RunPodSandbox", { config: withUserns("userns-refused", POD_USERNS) }).catch((e: unknown) => e);
  t.match(refused, { code: grpcStatus.FAILED_PRECONDITION, details: /asks for its own user namespace, which this node cannot give: / }, "FAILED_PRECONDITION naming the part");
  t.comment((refused as { details?: string }).details ?? "");

  const root = await client.call("RunPodSandbox", { config: withUserns("userns-root", { ...POD_USERNS, uids: [{ hostId: 0, containerId: 0, length: 65536 }] }) }).catch((e: unknown) => e);
  t.match(root, { code: grpcStatus.INVALID_ARGUMENT, details: /maps onto the host's own uids \(0-65535\)/ });
  const hostNet = await client
    .call("RunPodSandbox", { config: podConfig("userns-hostnet", { linux: { securityContext: { namespaceOptions: { network: 2, pid: 1, ipc: 0, usernsOptions: POD_USERNS } } } }) })
    .catch((e: unknown) => e);
  t.match(hostNet, { code: grpcStatus.INVALID_ARGUMENT, details: /host's network namespace/ });
  const noMappings = await client.call("RunPodSandbox", { config: withUserns("userns-empty", { mode: 0 }) }).catch((e: unknown) => e);
  t.match(noMappings, { code: grpcStatus.INVALID_ARGUMENT, details: /needs uid and gid mappings/ });

  // A pod in the host's namespace, and a container that asks for one of its own.
  const config = podConfig("userns-plain");
  const { podSandboxId } = await client.call("RunPodSandbox", { config });
  const container = await client
    .call("CreateContainer", {
      podSandboxId,
      sandboxConfig: config,
      config: {
        metadata: { name: "c", attempt: 0 },
        image: { image: BUSYBOX_IMAGE },
        command: ["sleep", "60"],
        labels: { "cridock.test": "sandboxes" },
        linux: { securityContext: { namespaceOptions: { pid: 1, usernsOptions: POD_USERNS } } },
      },
    })
    .catch((e: unknown) => e);
  t.match(container, { code: grpcStatus.INVALID_ARGUMENT, details: /asks for a user namespace, and its pod sandbox .* runs in the host's/ });
  await removePod(env, podSandboxId);
  t.equal(docker("ps", "-aq", "--filter", "label=io.kubernetes.pod.name=userns-refused"), "", "the refused pod got no pause container");
  await assertNoLeaks(t, env);
});
