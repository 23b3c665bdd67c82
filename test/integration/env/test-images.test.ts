/**
 * The environment scripts/env/setup.sh provides is what the other tests
 * take for granted: the test images behave as their names promise, and the
 * registries serve them (the auth one only with its credentials).
 */
import t, { type Test } from "tap";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import {
  AUTH_BUSYBOX_IMAGE,
  BUSYBOX_IMAGE,
  DEFAULT_PAUSE_IMAGE,
  HTTPD_IMAGE,
  PAUSE_IMAGE,
  REGISTRY,
  authRegistry,
} from "../../helpers/env.ts";

const run = promisify(execFile);

async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run("docker", args, { timeout: 60_000 });
  return stdout.trim();
}

/** A container named for this test run; removed at teardown whatever happens. */
async function startContainer(t: Test, image: string, ...args: string[]): Promise<string> {
  const name = `cridock-envtest-${randomBytes(4).toString("hex")}`;
  t.teardown(() => docker("rm", "-f", name).catch(() => undefined));
  await docker("run", "-d", "--network", "none", "--name", name, image, ...args);
  return name;
}

t.test("the pause image is also cridock's default pause image, and stops on SIGTERM at once", async (t) => {
  t.equal(await docker("image", "inspect", "-f", "{{.Id}}", DEFAULT_PAUSE_IMAGE), await docker("image", "inspect", "-f", "{{.Id}}", PAUSE_IMAGE));
  const name = await startContainer(t, PAUSE_IMAGE);
  // A 30 s grace period: a pause that ignored SIGTERM would be killed only after it, with exit code 137.
  await docker("stop", "-t", "30", name);
  t.equal(await docker("inspect", "-f", "{{.State.ExitCode}}", name), "0", "exited by itself (0), not killed (137)");
});

t.test("the pause image stops on SIGINT too", async (t) => {
  const name = await startContainer(t, PAUSE_IMAGE);
  await docker("kill", "-s", "INT", name);
  await docker("wait", name);
  t.equal(await docker("inspect", "-f", "{{.State.ExitCode}}", name), "0");
});

t.test("the pause image reaps the orphans a pod sharing its pid namespace leaves", async (t) => {
  const name = await startContainer(t, PAUSE_IMAGE);
  // The subshell exits at once, so its `sleep` is re-parented to the pause (pid 1) and dies there 0.2 s later.
  const zombies = await docker(
    "run", "--rm", "--network", "none", "--pid", `container:${name}`, BUSYBOX_IMAGE,
    "sh", "-c", "(sleep 0.2 &); sleep 2; awk '{print $3}' /proc/[0-9]*/stat | grep -c Z || true",
  );
  t.equal(zombies, "0", "no zombie left in the pod's pid namespace");
});

t.test("busybox has the tools critest's default image must have, and the standard users", async (t) => {
  const tools = "sh ls top echo sleep pgrep cat id hostname ping brctl touch mount mkdir dd seq sync netstat ipcs pidof grep chmod";
  const out = await docker("run", "--rm", "--network", "none", BUSYBOX_IMAGE, "sh", "-c", `for c in ${tools}; do command -v $c >/dev/null || echo "missing $c"; done; echo checked`);
  t.equal(out, "checked", "no tool is missing");
  t.equal(await docker("run", "--rm", "--network", "none", "--user", "nobody", BUSYBOX_IMAGE, "id", "-u"), "65534");
  t.equal(await docker("run", "--rm", "--network", "none", "--user", "www-data", BUSYBOX_IMAGE, "id", "-u"), "33");
  t.equal(await docker("run", "--rm", "--network", "none", BUSYBOX_IMAGE, "sh", "-c", "touch /tmp/x && echo -n ok"), "ok");
  t.same(JSON.parse(await docker("image", "inspect", "-f", "{{json .Config.Cmd}}", BUSYBOX_IMAGE)), ["sh"], "default command sh");
});

t.test("busybox applets are hard links, so masking one leaves the others (critest masks /bin/ls)", async (t) => {
  const out = await docker("run", "--rm", "--network", "none", BUSYBOX_IMAGE, "sh", "-c",
    "for a in /bin/ls /bin/sh /bin/cat; do [ -L $a ] && echo \"$a is a symlink\"; [ $a -ef /bin/busybox ] || echo \"$a is not busybox\"; done; echo checked");
  t.equal(out, "checked", "every applet is busybox itself, not a link to it");
  // What the MaskedPaths spec does: /dev/null bound over /bin/ls, then `/bin/sh -c ls`, which must
  // exec /bin/ls from PATH (a busybox that runs applets in-process would list / instead).
  const name = await startContainer(t, BUSYBOX_IMAGE, "sleep", "600");
  const { stdout: pid } = await run("docker", ["inspect", "-f", "{{.State.Pid}}", name]);
  await run("nsenter", ["-t", pid.trim(), "-m", "mount", "--bind", "/dev/null", "/bin/ls"]);
  const masked = await run("docker", ["exec", name, "/bin/sh", "-c", "ls"]).then(
    () => "ls ran",
    (e: { stderr?: string }) => e.stderr ?? "",
  );
  t.equal(masked, "/bin/sh: ls: Permission denied\n", "critest's expected stderr");
  t.equal(await docker("exec", name, "sh", "-c", "echo -n sh-still-works"), "sh-still-works");
});

t.test("pgrep in busybox finds processes by name", async (t) => {
  const name = await startContainer(t, BUSYBOX_IMAGE, "sleep", "600");
  t.match(await docker("exec", name, "pgrep", "sleep"), /^\d+$/);
  await t.rejects(docker("exec", name, "pgrep", "no-such-process"), "no match exits non-zero");
});

t.test("httpd answers 200 on / and says httpd when it starts", async (t) => {
  const name = await startContainer(t, HTTPD_IMAGE);
  const get = () => run("docker", ["exec", name, "wget", "-S", "-q", "-O", "/dev/null", "http://127.0.0.1/"]);
  // httpd may take a moment to listen: at most 50 tries, 100 ms apart.
  let headers = "";
  for (let i = 0; i < 50 && !headers; i++) {
    headers = await get().then(
      (r) => r.stderr,
      () => new Promise<string>((r) => setTimeout(() => r(""), 100)),
    );
  }
  t.match(headers, /HTTP\/1\.[01] 200 OK/);
  t.match(await docker("logs", name), /httpd/);
  await docker("stop", "-t", "30", name);
  t.equal(await docker("inspect", "-f", "{{.State.ExitCode}}", name), "0", "stops on SIGTERM");
});

t.test("the registries serve the images; the auth registry only with credentials", async (t) => {
  const manifest = (image: string) => {
    const [host, ...rest] = image.split("/");
    const [repo, tag] = rest.join("/").split(":");
    return `http://${host}/v2/${repo}/manifests/${tag}`;
  };
  const accept = { accept: "application/vnd.docker.distribution.manifest.v2+json" };
  const signal = () => AbortSignal.timeout(10_000);
  t.equal((await fetch(manifest(BUSYBOX_IMAGE), { method: "HEAD", headers: accept, signal: signal() })).status, 200, `busybox in ${REGISTRY}`);
  t.equal((await fetch(manifest(AUTH_BUSYBOX_IMAGE), { method: "HEAD", headers: accept, signal: signal() })).status, 401, "anonymous: 401");
  const creds = await authRegistry();
  const authorization = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString("base64")}`;
  const res = await fetch(manifest(AUTH_BUSYBOX_IMAGE), { method: "HEAD", headers: { ...accept, authorization }, signal: signal() });
  t.equal(res.status, 200, "with the stored credentials: 200");
});
