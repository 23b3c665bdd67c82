import t from "tap";

import type { Test } from "tap";
import { ConfigError, parseConfig, parseDuration, parseSize, type Config } from "../../src/config.ts";
import { configInfo } from "../../src/cri/runtime-info-rpcs.ts";

function config(argv: string[]): Config {
  const parsed = parseConfig(argv);
  if (parsed.kind !== "config") throw new Error(`expected a config, got ${parsed.kind}`);
  return parsed.config;
}

function rejects(t: Test, argv: string[], flag: string, reason: RegExp) {
  let caught: unknown;
  try {
    parseConfig(argv);
  } catch (err) {
    caught = err;
  }
  t.ok(caught instanceof ConfigError, `${argv.join(" ")} is refused`);
  t.equal((caught as ConfigError).flag, flag, `${argv.join(" ")} names --${flag}`);
  t.match((caught as Error).message, reason, `${argv.join(" ")} says why`);
}


t.test("defaults are cri-dockerd's where the meaning is the same", async (t) => {
  const c = config([]);
  t.equal(c.listenSocket, "/var/run/cridock.sock");
  t.equal(c.dockerEndpoint, "unix:///var/run/docker.sock");
  t.equal(c.podInfraContainerImage, "registry.k8s.io/pause:3.10.2");
  t.equal(c.networkPlugin, "cni");
  t.equal(c.cniConfDir, "/etc/cni/net.d");
  t.same(c.cniBinDirs, ["/opt/cni/bin", "/usr/lib/cni"]);
  t.equal(c.cniCacheDir, "/var/lib/cni/cache");
  t.equal(c.runtimeRequestTimeoutMs, 120_000);
  t.equal(c.imagePullProgressDeadlineMs, 60_000);
  t.equal(c.rootDirectory, "/var/lib/cridock");
  t.equal(c.streamingHost, "127.0.0.1");
  t.equal(c.streamingPort, 0);
  t.equal(c.logLevel, "info");
});

t.test("flags take both --flag=value and --flag value", async (t) => {
  const c = config([
    "--container-runtime-endpoint=unix:///run/x.sock",
    "--docker-endpoint",
    "unix:///run/d.sock",
    "--cni-bin-dir=/a, /b",
    "--runtime-request-timeout=1m30s",
    "--image-pull-progress-deadline=500ms",
    "--streaming-bind-addr=0.0.0.0:10010",
    "--log-level=debug",
    "--network-plugin=no-op",
  ]);
  t.equal(c.listenSocket, "/run/x.sock");
  t.equal(c.dockerEndpoint, "unix:///run/d.sock");
  t.same(c.cniBinDirs, ["/a", "/b"]);
  t.equal(c.runtimeRequestTimeoutMs, 90_000);
  t.equal(c.imagePullProgressDeadlineMs, 500);
  t.equal(c.streamingHost, "0.0.0.0");
  t.equal(c.streamingPort, 10010);
  t.equal(c.logLevel, "debug");
  t.equal(c.networkPlugin, "no-op");
});

t.test("--cri-dockerd-root-directory is cri-dockerd's root (read for adoption), not cridock's", async (t) => {
  t.equal(config([]).criDockerdRootDirectory, "/var/lib/cri-dockerd");
  t.match(config(["--cri-dockerd-root-directory=/srv/state"]), { rootDirectory: "/var/lib/cridock", criDockerdRootDirectory: "/srv/state" });
  t.equal(config(["--cri-dockerd-root-directory="]).criDockerdRootDirectory, "", "empty: take nothing over");
  rejects(t, ["--cri-dockerd-root-directory=rel"], "cri-dockerd-root-directory", /absolute/);
  rejects(t, ["--root-directory=/a", "--cri-dockerd-root-directory=/a/"], "cri-dockerd-root-directory", /root of its own/);
});

t.test("Status(verbose).info.config names the pause image as sandboxImage, as kubeadm reads it", async (t) => {
  const info = JSON.parse(JSON.stringify(configInfo(config([]))));
  t.equal(info.sandboxImage, "registry.k8s.io/pause:3.10.2", "kubeadm 1.36's expected pause image by default");
  t.equal(info.podInfraContainerImage, info.sandboxImage, "the other keys stay");
  t.equal(configInfo(config(["--pod-infra-container-image=example.test/pause:1"])).sandboxImage, "example.test/pause:1");
});

t.test("--restrict-oom-score-adj is auto, true or false", async (t) => {
  t.equal(config([]).restrictOomScoreAdj, "auto");
  t.equal(config(["--restrict-oom-score-adj=true"]).restrictOomScoreAdj, true);
  t.equal(config(["--restrict-oom-score-adj", "false"]).restrictOomScoreAdj, false);
  rejects(t, ["--restrict-oom-score-adj=yes"], "restrict-oom-score-adj", /auto, true, false/);
});

t.test("streaming bind address forms", async (t) => {
  t.match(config(["--streaming-bind-addr=10.0.0.1"]), { streamingHost: "10.0.0.1", streamingPort: 0 });
  t.match(config(["--streaming-bind-addr=[::1]:8080"]), { streamingHost: "::1", streamingPort: 8080 });
  rejects(t, ["--streaming-bind-addr=1.2.3.4:99999"], "streaming-bind-addr", /out of range/);
  rejects(t, ["--streaming-bind-addr=a b"], "streaming-bind-addr", /ip or ip:port/);
});

t.test("bad values name the flag and the reason", async (t) => {
  rejects(t, ["--container-runtime-endpoint=tcp://1.2.3.4:1"], "container-runtime-endpoint", /unix:\/\//);
  rejects(t, ["--container-runtime-endpoint=unix://relative.sock"], "container-runtime-endpoint", /absolute/);
  rejects(t, ["--runtime-request-timeout=soon"], "runtime-request-timeout", /not a duration/);
  rejects(t, ["--log-level=loud"], "log-level", /not one of/);
  rejects(t, ["--network-plugin=kubenet"], "network-plugin", /not one of cni, no-op/);
  rejects(t, ["--root-directory=var/lib"], "root-directory", /absolute/);
  rejects(t, ["--cni-bin-dir=bin"], "cni-bin-dir", /absolute/);
  rejects(t, ["--network-plugin-mtu=-1"], "network-plugin-mtu", /outside/);
  rejects(t, ["--docker-log-max-size=huge"], "docker-log-max-size", /size/);
  rejects(t, ["--pod-cidr=10.0.0.0"], "pod-cidr", /CIDR/);
  rejects(t, ["--no-such-flag"], "no-such-flag", /Unknown option/);
  rejects(t, ["positional"], "?", /positional|Unexpected argument/i);
});

t.test("--help and --version", async (t) => {
  const help = parseConfig(["--help"]);
  t.equal(help.kind, "help");
  if (help.kind === "help") {
    for (const flag of ["container-runtime-endpoint", "docker-endpoint", "pod-infra-container-image", "cni-conf-dir", "log-level"]) {
      t.match(help.text, `--${flag}`);
    }
  }
  t.same(parseConfig(["--version"]), { kind: "version" });
});

t.test("durations and sizes", async (t) => {
  t.equal(parseDuration("0"), 0);
  t.equal(parseDuration("2m"), 120_000);
  t.equal(parseDuration("1h2m3s"), 3_723_000);
  t.equal(parseDuration("1.5s"), 1500);
  t.equal(parseDuration("1500000µs"), 1500, "Go's µs, as Go prints it");
  t.equal(parseDuration("1500000us"), 1500);
  t.throws(() => parseDuration("10"));
  t.throws(() => parseDuration("5s garbage"));
  t.equal(parseSize("10m"), 10 * 1024 * 1024);
  t.equal(parseSize("512k"), 512 * 1024);
  t.equal(parseSize("100"), 100);
  t.throws(() => parseSize("10mb"));
});
