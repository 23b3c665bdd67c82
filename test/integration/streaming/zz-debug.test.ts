/**
 * Hostile clients against the real streaming server: reused and unknown
 * tokens, malformed SPDY, oversized headers, a WebSocket client that never
 * reads. Each gets its connection closed or refused; the server stays up and
 * nothing is left running.
 */
import t from "tap";
import { connect } from "node:net";
import { WebSocket } from "ws";
import { encodeSynStream } from "../../../src/streaming/spdy-frames.ts";
import { SpdyTestClient } from "../../helpers/spdy-client.ts";
import { connectionsTo, crictl, eventually, execSync, runPod, startContainer, startHarness, streamingUrl } from "./harness.ts";

const h = await startHarness(["--streaming-stall-timeout=3s"]);
t.teardown(() => h.close());
const pod = await runPod(h);
const ctr = await startContainer(h, pod, "target", ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]);

/** What an exec through the streaming server prints ("alive" while it serves). */
async function execThroughServer(): Promise<string> {
  const r = await crictl(h, ["exec", ctr, "echo", "-n", "alive"]);
  return r.stdout.toString();
}

t.test("a WebSocket client that never reads is dropped, and its command killed", async (t) => {
  const url = await streamingUrl(h, ctr, ["sh", "-c", "cat /dev/zero; sleep 995"]);
  const port = Number(new URL(url).port);
  const ws = new WebSocket(url.replace("http://", "ws://"), ["v5.channel.k8s.io"]);
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  t.equal(ws.protocol, "v5.channel.k8s.io");
  // Stop reading: the server's writes back up until its stall timeout ends the session.
  (ws as unknown as { _socket: { pause(): void } })._socket.pause();
  const closed = await eventually(async () => (await connectionsTo(port)) === 0, 30_000);
  t.ok(closed, "the server closed the connection");
  ws.terminate();
  { const cp = await import("node:child_process"); const s0 = Date.now(); const r = cp.spawnSync("docker", ["-H", process.env.CRIDOCK_TEST_DOCKER_ENDPOINT!, "exec", ctr, "ps", "-o", "pid,stat,args"], { encoding: "utf8", timeout: 20000 }); console.error("DOCKERPS", Date.now()-s0, r.status, (r.stdout||"").replace(/\n/g," | "), r.stderr); 
  const ls = cp.spawnSync("sh", ["-c", "ss -xpn | grep 'pid=" + h.cridock.child.pid + ",' | awk '{print $3, $4, $5, $6}' | sort | uniq -c | sort -rn | head"], { encoding: "utf8" }); console.error("FDS", ls.stdout); }
for (let k = 0; k < 2; k++) { const s0 = Date.now(); try { const r = await execSync(h, ctr, ["ps", "-o", "args"]); console.error("PS", Date.now()-s0, r.stdout.replace(/\n/g," | ")); } catch (e) { console.error("PSERR", Date.now()-s0, String(e).slice(0,200)); } }
  console.error(h.cridock.logs().split("\n").filter((l) => /exec|kill|WebSocket|stream/i.test(l)).slice(-30).join("\n"));
  t.equal(await execThroughServer(), "alive", "the streaming server still serves");
});

