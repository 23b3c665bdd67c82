import t from "tap";
import { inheritedListenFd } from "../../../src/cri/socket-activation.ts";
import { notifyArgs, notifyRequested } from "../../../src/systemd/notify.ts";
import { parseConfig, parseMetricsAddr, ConfigError } from "../../../src/config.ts";

t.test("fd:// takes exactly the one socket systemd passed to this process", async (t) => {
  t.equal(inheritedListenFd({ LISTEN_FDS: "1", LISTEN_PID: "42" }, 42), 3);
  t.equal(inheritedListenFd({ LISTEN_FDS: "1" }, 42), 3, "LISTEN_PID may be absent");
  t.throws(() => inheritedListenFd({}, 42), /LISTEN_FDS is not set.*cridock.socket/);
  t.throws(() => inheritedListenFd({ LISTEN_FDS: "1", LISTEN_PID: "7" }, 42), /LISTEN_PID=7 is not this process/);
  t.throws(() => inheritedListenFd({ LISTEN_FDS: "2", LISTEN_PID: "42" }, 42), /exactly one/);
  t.throws(() => inheritedListenFd({ LISTEN_FDS: "x" }, 42), /LISTEN_FDS/);
});

t.test("sd_notify assignments become systemd-notify arguments with our pid", async (t) => {
  t.same(notifyArgs(99, { READY: "1", STATUS: "serving\nnow" }), ["--pid=99", "--no-block", "READY=1", "STATUS=serving now"]);
  t.throws(() => notifyArgs(1, { "A=B": "1" }));
  t.equal(notifyRequested({}), false);
  t.equal(notifyRequested({ NOTIFY_SOCKET: "/run/systemd/notify" }), true);
});

t.test("--container-runtime-endpoint=fd:// and --metrics-bind-addr", async (t) => {
  const parsed = parseConfig(["--container-runtime-endpoint=fd://", "--metrics-bind-addr=9101"]);
  if (parsed.kind !== "config") throw new Error("expected config");
  t.equal(parsed.config.socketActivated, true);
  t.equal(parsed.config.listenSocket, "");
  t.same(parsed.config.metrics, { host: "127.0.0.1", port: 9101 });
  const plain = parseConfig([]);
  if (plain.kind !== "config") throw new Error("expected config");
  t.equal(plain.config.socketActivated, false);
  t.equal(plain.config.metrics, undefined, "metrics are off by default");
  t.same(parseMetricsAddr(":9102"), { host: "127.0.0.1", port: 9102 });
  t.same(parseMetricsAddr("0.0.0.0:9103"), { host: "0.0.0.0", port: 9103 }, "an explicit address is taken as given");
  t.same(parseMetricsAddr("[::1]:9104"), { host: "::1", port: 9104 });
  t.throws(() => parseMetricsAddr("127.0.0.1"), ConfigError, "a port is required");
  t.throws(() => parseMetricsAddr("99999"), /out of range/);
  t.throws(() => parseConfig(["--container-runtime-endpoint=fd://4"]), /only fd:\/\//);
});
