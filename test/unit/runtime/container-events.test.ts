// The pod event feed behind GetContainerEvents: what each event carries,
// several subscribers, and a slow subscriber that must neither block the
// others nor grow memory without bound.
import t from "tap";
import { PodEventFeed, type PodContainerEvent } from "../../../src/runtime/container-events.ts";
import type { ContainerEventListener, DockerContainerEvent } from "../../../src/docker/events.ts";
import { parseContainerEvent } from "../../../src/docker/events.ts";
import type { SandboxStatusInfo } from "../../../src/runtime/sandbox/record.ts";
import type { ContainerInfo } from "../../../src/runtime/container/spec.ts";
import { CridockError } from "../../../src/errors.ts";
import { createLogger } from "../../../src/log.ts";

const SANDBOX = "5".repeat(64);
const CONTAINER = "c".repeat(64);

function fixture() {
  const listeners = new Set<ContainerEventListener>();
  let builds = 0;
  let sandboxGone = false;
  const sandbox = (id: string): SandboxStatusInfo => ({
    id,
    metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 },
    ready: true,
    createdAt: 1n,
    labels: {},
    annotations: {},
    runtimeHandler: "",
    ips: ["10.0.0.2"],
    namespaces: { network: "pod", pid: "pod", ipc: "pod", targetId: "" },
    info: { containerState: "running" },
  });
  const feed = new PodEventFeed({
    events: {
      subscribe: (l) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    },
    sandboxStatus: async (id) => {
      builds++;
      if (sandboxGone) throw new CridockError("NOT_FOUND", `pod sandbox ${id} not found`);
      return sandbox(id);
    },
    containerStatuses: async () => [{ id: CONTAINER, name: "app", state: "running" } as ContainerInfo],
    log: createLogger("silent"),
  });
  const emit = (e: Partial<DockerContainerEvent>) => {
    for (const l of listeners) l({ id: CONTAINER, action: "start", timeNanos: 5n, attributes: {}, ...e });
  };
  return { feed, emit, listeners, get builds() { return builds; }, gone: () => (sandboxGone = true) };
}

const containerAttrs = { "io.kubernetes.docker.type": "container", "io.kubernetes.sandbox.id": SANDBOX, name: "k8s_app_web_default_u1_0" };
const sandboxAttrs = { "io.kubernetes.docker.type": "podsandbox", name: "k8s_POD_web_default_u1_0", app: "web" };

t.test("an event carries the sandbox status and every container status", async (t) => {
  const f = fixture();
  const sub = f.feed.subscribe();
  const before = BigInt(Date.now()) * 1_000_000n;
  f.emit({ action: "start", attributes: containerAttrs });
  const e = (await sub.next()) as PodContainerEvent;
  t.equal(e.type, "started");
  t.equal(e.containerId, CONTAINER);
  t.equal(e.sandbox.id, SANDBOX);
  t.equal(e.sandbox.metadata.uid, "u1");
  t.same(e.containers.map((c) => c.id), [CONTAINER]);
  t.ok(e.createdAt >= before, "stamped when it was built");
  f.emit({ action: "exec_start: sh", attributes: containerAttrs });
  f.emit({ action: "start", attributes: { name: "not-ours" } });
  f.emit({ id: SANDBOX, action: "die", attributes: sandboxAttrs });
  const next = (await sub.next()) as PodContainerEvent;
  t.equal(next.type, "stopped", "exec and foreign containers' events are skipped");
  t.equal(next.containerId, SANDBOX, "the pause container's events are the sandbox's");
  sub.close();
  t.equal(await sub.next(), undefined, "a closed subscription ends");
  t.equal(f.listeners.size, 0, "with no subscriber the feed stops listening to Docker");
});

t.test("a removed sandbox is described from its destroy event", async (t) => {
  const f = fixture();
  const sub = f.feed.subscribe();
  f.gone();
  f.emit({ id: SANDBOX, action: "destroy", attributes: sandboxAttrs });
  const e = (await sub.next()) as PodContainerEvent;
  t.equal(e.type, "deleted");
  t.same(e.sandbox.metadata, { name: "web", namespace: "default", uid: "u1", attempt: 0 }, "metadata from the container name");
  t.same(e.sandbox.labels, { app: "web" }, "labels from the attributes, without Docker's own keys or cridock's");
  t.equal(e.sandbox.ready, false);
  t.same(e.containers, []);
  sub.close();
});

t.test("a subscriber that does not read is ended; the others get everything", async (t) => {
  const f = fixture();
  const slow = f.feed.subscribe(5);
  const fast = f.feed.subscribe(5);
  const got: string[] = [];
  const reading = (async () => {
    for (let i = 0; i < 20; i++) got.push(((await fast.next()) as PodContainerEvent).type);
  })();
  for (let i = 0; i < 20; i++) {
    f.emit({ action: i % 2 ? "die" : "start", attributes: containerAttrs });
    await new Promise((r) => setImmediate(r));
  }
  await reading;
  t.equal(got.length, 20, "the reading subscriber received every event");
  const drained: unknown[] = [];
  const err = await (async () => {
    try {
      for (;;) drained.push(await slow.next());
    } catch (e) {
      return e;
    }
  })();
  t.equal(drained.length, 0, "the slow subscriber's queue was dropped, not kept");
  t.match(err, { code: "RESOURCE_EXHAUSTED" }, "and it is told why");
  t.equal(f.feed.subscriberCount, 1);
  fast.close();
});

t.test("nothing is built while nobody listens", async (t) => {
  const f = fixture();
  f.emit({ action: "start", attributes: containerAttrs });
  t.equal(f.builds, 0);
});

t.test("Docker's event JSON is parsed with exact nanoseconds", async (t) => {
  const e = parseContainerEvent({
    Type: "container",
    Action: "die",
    Actor: { ID: CONTAINER, Attributes: { exitCode: "0" } },
    time: 1767323045,
    timeNano: 1767323045123456789,
  });
  t.equal(e?.action, "die");
  t.equal(e?.timeNanos! / 1_000_000_000n, 1767323045n);
  t.equal(parseContainerEvent({ Type: "network", Action: "connect", Actor: { ID: CONTAINER } }), undefined);
  t.equal(parseContainerEvent("garbage"), undefined);
});
