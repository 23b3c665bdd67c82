// What a node operator relies on for pod lifecycles, through a real kubelet:
// init containers, probes, lifecycle hooks, resources and security context
// reaching Docker, volumes, a crash loop with growing back-off and previous
// logs, graceful deletion, then garbage collection with nothing leaked.
import t from "tap";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { watchDie } from "./harness/docker-die.ts";
import { KubeletEnv, sleep, type ContainerStatusView, type PodView } from "./harness/kubelet-env.ts";
import { BUSYBOX_IMAGE, GROUPS_IMAGE, GROUPS_IMAGE_USER, HTTPD_IMAGE, IMAGE_VOLUME_FILES, IMAGE_VOLUME_IMAGE } from "../helpers/env.ts";

const env = await KubeletEnv.start();
t.teardown(() => env.destroy());
const hostDir = await mkdtemp(join(tmpdir(), "cridock-e2e-host-"));
t.teardown(() => rm(hostDir, { recursive: true, force: true }));

const sh = (script: string) => ["sh", "-c", script];
// With evented PLEG kubelet starts a pod's termination only once its pod
// cache is newer than the deletion, which without a container event takes
// up to its 5 s global cache refresh: allow for that in stop timings.
const KUBELET_LAG_MS = env.evented ? 7_000 : 0;
const busybox = (name: string, script: string, extra: Record<string, unknown> = {}) => ({ name, image: BUSYBOX_IMAGE, command: sh(script), ...extra });
const inspect = (id: string) => JSON.parse(env.docker("inspect", id.replace("docker://", "")))[0];
// The container may be removed as soon as it dies: its die event, watched from before the deletion, tells how it ended.
const dieOf = (id: string) => watchDie(env.dockerd.endpoint, id.replace("docker://", ""), 20_000 + KUBELET_LAG_MS);
const status = (cs: ContainerStatusView[] | undefined, name: string) => cs?.find((c) => c.name === name);

// The crash loop runs while the rest is tested: back-off takes its time.
// A poller notes when kubelet reports each new restart.
await env.writePod({
  metadata: { name: "crash", namespace: "default" },
  spec: { terminationGracePeriodSeconds: 1, containers: [busybox("app", "echo run-at-$(date +%s); exit 3")] },
});
const restartSeenAt: number[] = [];
const crashPoller = setInterval(() => {
  env.pod("crash").then(
    (p) => {
      const count = p?.status.containerStatuses?.[0]?.restartCount ?? 0;
      while (restartSeenAt.length < count) restartSeenAt.push(Date.now());
    },
    () => undefined,
  );
}, 250);
t.teardown(() => clearInterval(crashPoller));

t.test("init containers run to completion, in order, before the app", async (t) => {
  await env.writePod({
    metadata: { name: "init", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      volumes: [{ name: "shared", emptyDir: {} }],
      initContainers: [busybox("first", "echo first >> /shared/order; sleep 1", { volumeMounts: [{ name: "shared", mountPath: "/shared" }] }), busybox("second", "echo second >> /shared/order", { volumeMounts: [{ name: "shared", mountPath: "/shared" }] })],
      containers: [busybox("app", "echo app >> /shared/order; cat /shared/order; sleep 3600", { volumeMounts: [{ name: "shared", mountPath: "/shared" }] })],
    },
  });
  const pod = await env.waitRunning("init");
  const inits = pod.status.initContainerStatuses ?? [];
  t.same(inits.map((c) => [c.name, c.state.terminated?.exitCode, c.state.terminated?.reason]), [["first", 0, "Completed"], ["second", 0, "Completed"]]);
  const logs = (await env.get(`/containerLogs/default/${env.podName("init")}/app`)).body;
  t.equal(logs, "first\nsecond\napp\n", "the emptyDir saw init containers, in order, before the app");
});

t.test("startup, liveness and readiness probes: exec, HTTP and TCP", async (t) => {
  await env.writePod({
    metadata: { name: "probes", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "web",
          image: HTTPD_IMAGE,
          startupProbe: { exec: { command: ["sh", "-c", "test -e /var/www/index.html"] }, periodSeconds: 1, failureThreshold: 30 },
          livenessProbe: { httpGet: { path: "/", port: 80 }, periodSeconds: 1 },
          readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 1 },
        },
        // Alive only while /tmp/alive exists: removed after 4 s, so liveness fails and kubelet restarts it.
        busybox("flaky", "touch /tmp/alive; (sleep 4; rm /tmp/alive) & exec sleep 3600", {
          livenessProbe: { exec: { command: ["cat", "/tmp/alive"] }, periodSeconds: 1, failureThreshold: 1, initialDelaySeconds: 1 },
        }),
      ],
    },
  });
  const pod = await env.waitPod("probes", "web ready and flaky restarted", (p) => {
    const web = status(p.status.containerStatuses, "web");
    const flaky = status(p.status.containerStatuses, "flaky");
    return web?.ready && web.started && (flaky?.restartCount ?? 0) >= 1 ? p : undefined;
  });
  const web = status(pod.status.containerStatuses, "web")!;
  t.equal(web.restartCount, 0, "the healthy container passes all its probes and is never restarted");
  t.ok(pod.status.conditions?.some((c) => c.type === "ContainersReady"), "readiness is reported");
  t.ok(status(pod.status.containerStatuses, "flaky")!.restartCount >= 1, "a failing liveness probe restarts the container");
});

t.test("postStart and preStop hooks run; deletion honours the grace period", async (t) => {
  await env.writePod({
    metadata: { name: "hooks", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 10,
      volumes: [{ name: "host", hostPath: { path: hostDir, type: "Directory" } }],
      containers: [
        busybox("app", "trap 'echo term >> /host/events; sleep 2; echo exiting >> /host/events; exit 0' TERM; while true; do sleep 0.2; done", {
          volumeMounts: [{ name: "host", mountPath: "/host" }],
          lifecycle: {
            postStart: { exec: { command: ["sh", "-c", "echo postStart >> /host/events"] } },
            preStop: { exec: { command: ["sh", "-c", "echo preStop >> /host/events"] } },
          },
        }),
      ],
    },
  });
  const pod = await env.waitRunning("hooks");
  const id = status(pod.status.containerStatuses, "app")!.containerID!;
  t.equal(await readFile(join(hostDir, "events"), "utf8"), "postStart\n", "postStart ran, through the hostPath volume");
  const died = dieOf(id);
  const deleted = Date.now();
  await env.deletePod("hooks");
  const death = await died;
  const took = death.at - deleted;
  t.equal(await readFile(join(hostDir, "events"), "utf8"), "postStart\npreStop\nterm\nexiting\n", "preStop, then SIGTERM, then the container's own exit");
  t.equal(death.exitCode, 0, "the container exited by itself within its grace period (not killed)");
  t.ok(took >= 2000 && took < 10_000 + KUBELET_LAG_MS, `stopping took ${took} ms: the 2 s the container needed, less than the 10 s allowed`);
});

t.test("a container that ignores SIGTERM is killed when its grace period ends", async (t) => {
  await env.writePod({
    metadata: { name: "stubborn", namespace: "default" },
    spec: { terminationGracePeriodSeconds: 3, containers: [busybox("app", "trap '' TERM; while true; do sleep 0.2; done")] },
  });
  const pod = await env.waitRunning("stubborn");
  const id = status(pod.status.containerStatuses, "app")!.containerID!;
  const died = dieOf(id);
  const deleted = Date.now();
  await env.deletePod("stubborn");
  const death = await died;
  const took = death.at - deleted;
  t.equal(death.exitCode, 137, "SIGKILL");
  t.ok(took >= 2500 && took < 9000 + KUBELET_LAG_MS, `killed after ${took} ms (grace period 3 s)`);
});

t.test("resources and security context reach Docker", async (t) => {
  await env.writePod({
    metadata: { name: "limits", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      // The user is set per container: the test pause image needs root (it makes a fifo in /dev).
      securityContext: { supplementalGroups: [33] },
      containers: [
        busybox("app", "id; sleep 3600", {
          resources: { requests: { cpu: "250m", memory: "32Mi" }, limits: { cpu: "500m", memory: "64Mi" } },
          securityContext: {
            runAsUser: 65534,
            runAsGroup: 65534,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] },
          },
        }),
      ],
    },
  });
  const pod = await env.waitRunning("limits");
  const c = inspect(status(pod.status.containerStatuses, "app")!.containerID!);
  t.equal(c.HostConfig.Memory, 64 * 1024 * 1024, "memory limit");
  t.equal(c.HostConfig.CpuQuota, 50_000, "CPU limit as a CFS quota");
  t.equal(c.HostConfig.CpuPeriod, 100_000);
  t.equal(c.HostConfig.CpuShares, 256, "CPU request as shares");
  t.equal(c.HostConfig.ReadonlyRootfs, true);
  t.ok((c.HostConfig.CapDrop ?? []).includes("ALL"), "capabilities dropped");
  t.match(c.HostConfig.CapAdd, [/NET_BIND_SERVICE$/], "capabilities added");
  t.ok((c.HostConfig.SecurityOpt ?? []).includes("no-new-privileges"), "no privilege escalation");
  t.equal(c.Config.User, "65534:65534");
  t.ok((c.HostConfig.GroupAdd ?? []).includes("33"), "supplemental groups");
  const logs = (await env.get(`/containerLogs/default/${env.podName("limits")}/app`)).body;
  t.match(logs, /uid=65534.*gid=65534.*groups=.*33/, "the process runs as the pod asked");
});

t.test("an image volume: the whole image and a sub-path, read-only", async (t) => {
  await env.writePod({
    metadata: { name: "imagevol", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      volumes: [{ name: "content", image: { reference: IMAGE_VOLUME_IMAGE, pullPolicy: "IfNotPresent" } }],
      containers: [
        busybox("app", "cat /vol/content/hello.txt /sub/inner.txt; touch /vol/x 2>/dev/null && echo writable || echo read-only; sleep 3600", {
          volumeMounts: [
            { name: "content", mountPath: "/vol" },
            { name: "content", mountPath: "/sub", subPath: "content/sub" },
          ],
        }),
      ],
    },
  });
  await env.waitRunning("imagevol");
  const expected = `${IMAGE_VOLUME_FILES["/content/hello.txt"]}${IMAGE_VOLUME_FILES["/content/sub/inner.txt"]}read-only\n`;
  let logs = "";
  for (let i = 0; i < 20 && logs !== expected; i++) {
    logs = (await env.get(`/containerLogs/default/${env.podName("imagevol")}/app`)).body;
    if (logs !== expected) await sleep(250);
  }
  t.equal(logs, expected, "the pod reads the image's files and cannot write them");
});

t.test("supplementalGroupsPolicy Strict: no groups from the image's /etc/group", async (t) => {
  const { uid, gid } = GROUPS_IMAGE_USER;
  await env.writePod({
    metadata: { name: "strict", namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      securityContext: { supplementalGroupsPolicy: "Strict", supplementalGroups: [1234] },
      containers: [{ name: "app", image: GROUPS_IMAGE, command: sh("id -G; sleep 3600"), securityContext: { runAsUser: uid } }],
    },
  });
  const pod = await env.waitRunning("strict");
  let logs = "";
  for (let i = 0; i < 20 && !logs; i++) {
    logs = (await env.get(`/containerLogs/default/${env.podName("strict")}/app`)).body;
    if (!logs) await sleep(250);
  }
  const groups = logs.trim().split(/\s+/).map(Number).sort((a, b) => a - b);
  t.same(groups, [1234, gid], "the primary group and the pod's group only");
  const user = (status(pod.status.containerStatuses, "app") as { user?: { linux?: { uid: number; gid: number; supplementalGroups?: number[] } } }).user;
  if (user?.linux) {
    t.same([user.linux.uid, user.linux.gid, [...(user.linux.supplementalGroups ?? [])].sort((a, b) => a - b)], [uid, gid, [1234, gid]], "the pod status reports the identity");
  } else {
    t.comment("kubelet's pod status carries no container user here");
  }
});

t.test("a crash loop backs off more each time and keeps the previous run's logs", async (t) => {
  // kubelet keeps one dead container per container name: when a run dies it
  // removes the run before, which the status still names as lastState until
  // kubelet's next sync of the backed-off pod (10-15 s later) reports it
  // waiting in CrashLoopBackOff. From then on lastState is the run kept.
  const backedOff = (p: PodView) => {
    const app = status(p.status.containerStatuses, "app");
    return (app?.restartCount ?? 0) >= 3 && restartSeenAt.length >= 3 && app?.state.waiting?.reason === "CrashLoopBackOff" ? p : undefined;
  };
  const pod = await env.waitPod("crash", "three restarts, then back-off", backedOff, 120_000);
  const app = status(pod.status.containerStatuses, "app")!;
  t.equal(app.lastState?.terminated?.exitCode, 3, "the last exit code is kept");
  let previous = "";
  for (let i = 0; i < 10 && !/^run-at-\d+\n$/.test(previous); i++) {
    previous = (await env.get(`/containerLogs/default/${env.podName("crash")}/app?previous=true`)).body;
    if (!/^run-at-\d+\n$/.test(previous)) await sleep(500);
  }
  t.match(previous, /^run-at-\d+\n$/, "previous=true shows the last run's output");
  clearInterval(crashPoller);
  // Restarts 2 and 3 were seen while polling (the first may predate it).
  const gaps = restartSeenAt.slice(1).map((at, i) => at - restartSeenAt[i]!);
  t.ok(gaps.length >= 2, `restarts seen at ${restartSeenAt.map((at) => new Date(at).toISOString().slice(11, 19))}`);
  t.ok(gaps[gaps.length - 1]! > gaps[gaps.length - 2]! + 5_000, `back-off grows: ${gaps.map((g) => (g / 1000).toFixed(1))} s between restarts`);
  t.ok(gaps[gaps.length - 1]! >= 15_000, "kubelet's back-off doubles from 10 s");
});

t.test("deleted pods are garbage collected with nothing leaked", async (t) => {
  for (const name of ["crash", "init", "probes", "limits", "imagevol", "strict"]) await env.deletePod(name);
  const deadline = Date.now() + 150_000;
  let leaks = await env.leaks();
  while (Object.values(leaks).some((l) => l.length > 0) && Date.now() < deadline) {
    await sleep(2000);
    leaks = await env.leaks();
  }
  t.same(leaks, { containers: [], netnsMounts: [], netnsHandles: [], checkpoints: [], veths: [], ips: [] }, "no container, netns, checkpoint, veth or IP is left");
  const errors = env.cridock.logs().split("\n").filter((l) => l.includes('"level":"error"'));
  t.same(errors, [], "cridock logged no error");
});
