/**
 * cri-api v0.37 renamed every Signal value (SIGTERM → SIGNAL_SIGTERM) and
 * kept the numbers. Names are read in both spellings and Docker's, and what
 * goes to Docker is Docker's name; a number the enum lacks is refused.
 */
import t from "tap";
import { dockerSignalName, signalFromName } from "../../src/cri/signal-names.ts";
import { Signal } from "../../src/cri/proto-types.ts";
import { specFromCri, statusToCri } from "../../src/cri/container-rpcs.ts";
import { criRoot } from "../../src/cri/proto.ts";
import type { ContainerInfo } from "../../src/runtime/container/spec.ts";

t.test("the enum's numbers are those of v0.36, under v0.37's names", async (t) => {
  t.equal(Signal.SIGNAL_RUNTIME_DEFAULT, 0);
  t.equal(Signal.SIGNAL_SIGKILL, 13);
  t.equal(Signal.SIGNAL_SIGTERM, 23);
  t.equal(Signal.SIGNAL_SIGRTMINPLUS1, 36);
  t.equal(Signal.SIGNAL_SIGRTMAX, 65);
  t.equal(Object.keys(Signal).length, 66);
  t.ok(Object.keys(Signal).every((k) => k.startsWith("SIGNAL_")));
});

t.test("every value reads back from either spelling and from Docker's name", async (t) => {
  for (const [key, value] of Object.entries(Signal)) {
    t.equal(signalFromName(key), value, key);
    t.equal(signalFromName(key.slice("SIGNAL_".length)), value, `${key} as v0.36 spelt it`);
    if (value === Signal.SIGNAL_RUNTIME_DEFAULT) continue;
    const docker = dockerSignalName(value);
    t.ok(docker && /^SIG[A-Z0-9]+([+-]\d+)?$/.test(docker), `${key} → ${docker}`);
    t.equal(signalFromName(docker!), value, `${docker} reads back`);
  }
});

t.test("Docker's forms and the special names", async (t) => {
  t.equal(dockerSignalName(Signal.SIGNAL_SIGTERM), "SIGTERM");
  t.equal(dockerSignalName(Signal.SIGNAL_SIGRTMINPLUS1), "SIGRTMIN+1");
  t.equal(dockerSignalName(Signal.SIGNAL_SIGRTMAXMINUS14), "SIGRTMAX-14");
  t.equal(dockerSignalName(Signal.SIGNAL_RUNTIME_DEFAULT), undefined);
  t.equal(dockerSignalName(66), undefined);
  const reads: [string, number | undefined][] = [
    ["SIGTERM", Signal.SIGNAL_SIGTERM],
    ["SIGNAL_SIGTERM", Signal.SIGNAL_SIGTERM],
    ["TERM", Signal.SIGNAL_SIGTERM],
    ["sigterm", Signal.SIGNAL_SIGTERM],
    [" SIGQUIT ", Signal.SIGNAL_SIGQUIT],
    ["SIGRTMIN+3", Signal.SIGNAL_SIGRTMINPLUS3],
    ["RTMIN+3", Signal.SIGNAL_SIGRTMINPLUS3],
    ["SIGNAL_SIGRTMAXMINUS2", Signal.SIGNAL_SIGRTMAXMINUS2],
    ["SIGRTMAX-2", Signal.SIGNAL_SIGRTMAXMINUS2],
    ["SIGIOT", Signal.SIGNAL_SIGIOT],
    ["", Signal.SIGNAL_RUNTIME_DEFAULT],
    ["RUNTIME_DEFAULT", Signal.SIGNAL_RUNTIME_DEFAULT],
    ["SIGNAL_RUNTIME_DEFAULT", Signal.SIGNAL_RUNTIME_DEFAULT],
    ["SIGBOGUS", undefined],
    ["SIGNAL", undefined],
    ["SIGNAL_", undefined],
    ["15", undefined],
    ["SIGRTMIN+16", undefined],
  ];
  for (const [name, value] of reads) t.equal(signalFromName(name), value, JSON.stringify(name));
});

t.test("CreateContainer's stop_signal goes to Docker by Docker's name; an unknown number is refused", async (t) => {
  // A number off the wire is whatever the client sent, in the enum or not.
  const config = (stopSignal: number) => ({ metadata: { name: "app" }, image: { image: "busybox" }, stopSignal: stopSignal as Signal });
  t.equal(specFromCri(config(Signal.SIGNAL_SIGUSR1)).stopSignal, "SIGUSR1");
  t.equal(specFromCri(config(Signal.SIGNAL_SIGRTMINPLUS15)).stopSignal, "SIGRTMIN+15");
  t.equal(specFromCri(config(Signal.SIGNAL_RUNTIME_DEFAULT)).stopSignal, "", "the image's own");
  t.throws(() => specFromCri(config(99)), { code: "INVALID_ARGUMENT", message: /stop_signal 99 is not a value of CRI's Signal enum/ });
  // On the wire: a v0.36 client's SIGTERM and a v0.37 client's SIGNAL_SIGTERM are the same number.
  const type = criRoot().lookupType("runtime.v1.ContainerConfig");
  const decoded = type.toObject(type.decode(type.encode(type.fromObject({ stopSignal: "SIGNAL_SIGTERM" })).finish()), { enums: Number });
  t.equal(decoded.stopSignal, 23);
});

t.test("ContainerStatus' stop_signal reads Docker's name in any of its forms", async (t) => {
  const info = (stopSignal: string) => ({ id: "c", sandboxId: "s", name: "app", attempt: 0, image: "busybox", imageId: "sha256:1", state: "running", createdAt: 0n, labels: {}, annotations: {}, startedAt: 0n, finishedAt: 0n, exitCode: 0, reason: "", message: "", mounts: [], logPath: "", resources: {}, stopSignal, info: {} }) as unknown as ContainerInfo;
  t.equal(statusToCri(info("SIGQUIT")).stopSignal, Signal.SIGNAL_SIGQUIT);
  t.equal(statusToCri(info("QUIT")).stopSignal, Signal.SIGNAL_SIGQUIT, "the short form Docker also takes");
  t.equal(statusToCri(info("SIGRTMIN+2")).stopSignal, Signal.SIGNAL_SIGRTMINPLUS2);
  t.equal(statusToCri(info("")).stopSignal, Signal.SIGNAL_RUNTIME_DEFAULT);
});
