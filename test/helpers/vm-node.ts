/**
 * The cgroup v2 test node for tap tests: a Debian VM with systemd as
 * PID 1 that scripts/vm/node.sh builds, boots, reaches over ssh and stops
 * (docs/testing.md, "The cgroup v2 node"). Every call runs that script
 * with a timeout; on a timeout its whole process group is killed (ssh
 * included) and the result says so.
 *
 * The guest's CPU is emulated (qemu TCG, about 20 times slower than the
 * host's), so the timeouts are minutes, not seconds. Long steps (building
 * the image, booting) print the script's progress on stderr.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { CRIDOCK_VERSION } from "../../src/version.ts";
import { CATALOG } from "../../scripts/env/images/catalog.ts";
import { imageConfig, writeDockerArchive, type ImageRunConfig } from "../../scripts/env/images/docker-archive.ts";
import { buildLayer, type LayerEntry } from "../../scripts/env/images/layer.ts";
import { REPO_ROOT } from "./cridock-process.ts";
import { DEFAULT_PAUSE_IMAGE, MIRROR_CA_FILE, MIRRORED_REGISTRIES } from "./env.ts";

const SCRIPT = join(REPO_ROOT, "scripts/vm/node.sh");

export interface RunResult {
  /** Exit status; null when killed (timedOut says whether by the timeout). */
  status: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface RunOptions {
  timeoutMs?: number;
  /** Written to the command's stdin (closed after). */
  input?: string | Buffer;
  /** Pass the command's stderr through to this process's stderr as it comes (progress of long steps). */
  progress?: boolean;
  cwd?: string;
  env?: Record<string, string>;
}

/** Runs a command in a process group of its own, killed whole at the timeout. */
export function runCommand(command: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  const { timeoutMs = 120_000, input, progress = false } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...process.env, ...options.env },
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
      if (progress) process.stderr.write(d);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // gone already
      }
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, timedOut });
    });
    // A command that never reads its stdin closes the pipe early; that is no failure.
    child.stdin.on("error", () => undefined);
    child.stdin.end(input ?? "");
  });
}

function describe(what: string, r: RunResult, timeoutMs: number): string {
  const how = r.timedOut ? `timed out after ${timeoutMs / 1000}s` : `exited with ${r.status}`;
  return `${what} ${how}:\n${(r.stdout + r.stderr).trim().slice(-6000)}`;
}

export class VmNode {
  private constructor(readonly name: string) {}

  /**
   * Builds the image if its inputs changed (about 15 minutes), then boots a
   * VM of that name on an overlay and waits for its ssh (a few minutes).
   * memoryMb: the guest's memory (vm/node.sh's default otherwise).
   */
  static async start(name: string, { timeoutMs = 40 * 60_000, memoryMb }: { timeoutMs?: number; memoryMb?: number } = {}): Promise<VmNode> {
    const env: Record<string, string> = memoryMb ? { CRIDOCK_VM_MEMORY_MB: String(memoryMb) } : {};
    const r = await runCommand("bash", [SCRIPT, "start", name], { timeoutMs, progress: true, env });
    if (r.status !== 0) {
      // A VM a timeout left behind does not outlive the test.
      await runCommand("bash", [SCRIPT, "stop", name], { timeoutMs: 150_000 });
      throw new Error(describe(`vm/node.sh start ${name}`, r, timeoutMs));
    }
    return new VmNode(name);
  }

  /** CMD in the guest's root shell; the result, whatever the exit status. */
  ssh(command: string, options: RunOptions = {}): Promise<RunResult> {
    return runCommand("bash", [SCRIPT, "ssh", this.name, command], options);
  }

  /** CMD in the guest; its stdout, or an error with its output when it fails. */
  async run(command: string, options: RunOptions = {}): Promise<string> {
    const timeoutMs = options.timeoutMs ?? 120_000;
    const r = await this.ssh(command, { ...options, timeoutMs });
    if (r.status !== 0) throw new Error(describe(`in VM ${this.name}: ${command}`, r, timeoutMs));
    return r.stdout;
  }

  /** Copies a host file or directory to a guest path (through the VM's read-only 9p share). */
  async copy(source: string, destination: string, timeoutMs = 600_000): Promise<void> {
    const r = await runCommand("bash", [SCRIPT, "copy", this.name, source, destination], { timeoutMs });
    if (r.status !== 0) throw new Error(describe(`copying ${source} to VM ${this.name}:${destination}`, r, timeoutMs));
  }

  /**
   * Reboots the guest on the same disk and waits for its ssh: `systemctl
   * reboot`, or with crash sysrq's immediate reset (no sync, no unmount,
   * no unit stopped: a power loss as the guest sees it).
   */
  async reboot({ crash = false, timeoutMs = 30 * 60_000 }: { crash?: boolean; timeoutMs?: number } = {}): Promise<void> {
    const r = await runCommand("bash", [SCRIPT, "reboot", this.name, ...(crash ? ["--crash"] : [])], { timeoutMs, progress: true });
    if (r.status !== 0) throw new Error(describe(`vm/node.sh reboot ${this.name}${crash ? " --crash" : ""}`, r, timeoutMs));
  }

  /** Powers the guest off (killed after a bounded wait) and removes its overlay. */
  async stop(timeoutMs = 150_000): Promise<void> {
    const r = await runCommand("bash", [SCRIPT, "stop", this.name], { timeoutMs });
    if (r.status !== 0) throw new Error(describe(`vm/node.sh stop ${this.name}`, r, timeoutMs));
  }
}

/**
 * Polls FN every intervalMs (5 s by default) until it returns something, or
 * the deadline passes (then undefined): the guest's steps take an emulated
 * minute or more.
 */
export async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs = 600_000, intervalMs = 5000): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await fn();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return undefined;
}

/** TEXT as one word of the guest's shell. */
export const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

export const DEB_PATH = join(REPO_ROOT, `dist/cridock_${CRIDOCK_VERSION}_amd64.deb`);

/**
 * The node a test file runs on. scripts/test.sh boots one for the whole
 * suite and names it in CRIDOCK_VM_NODE (booting is minutes of emulated
 * CPU); a file run alone boots its own, named NAME, and powers it off when
 * it ends.
 */
export async function suiteNode(t: { teardown(fn: () => unknown): void }, name: string): Promise<VmNode> {
  const shared = process.env.CRIDOCK_VM_NODE;
  if (shared) return VmNode.start(shared, { timeoutMs: 600_000 });
  const vm = await VmNode.start(name);
  t.teardown(() => vm.stop());
  return vm;
}

/**
 * What a VM file starts with, made side by side: its node (suiteNode), the
 * suite's .deb (suiteDeb) and the image tarballs BUILD writes into a
 * scratch directory (removed when the file ends). CLEANUP, registered as
 * soon as the node is up, leaves a shared node as the next file expects.
 * Throws what failed, after the node's cleanup is registered.
 */
export async function suiteSetup(
  t: { teardown(fn: () => unknown): void; comment(message: string): void },
  name: string,
  build: (dir: string) => Promise<string[]>,
  cleanup?: (vm: VmNode) => Promise<unknown>,
): Promise<{ vm: VmNode; deb: string; images: string[] }> {
  const started = Date.now();
  const scratch = await mkdtemp(join(tmpdir(), `cridock-vm-${name}-`));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const [booted, built, images] = await Promise.allSettled([suiteNode(t, name), suiteDeb(), build(scratch)]);
  if (booted.status === "rejected") throw booted.reason;
  const vm = booted.value;
  if (cleanup) t.teardown(() => cleanup(vm));
  if (built.status === "rejected") throw built.reason;
  if (images.status === "rejected") throw images.reason;
  t.comment(`VM booted, .deb and images built in ${Math.round((Date.now() - started) / 1000)} s`);
  return { vm, deb: built.value, images: images.value };
}

/** The .deb scripts/test.sh built for the suite (CRIDOCK_VM_DEB), else one built now. */
export async function suiteDeb(): Promise<string> {
  return process.env.CRIDOCK_VM_DEB || buildDeb();
}

/**
 * The .deb installed in the guest unless this very file is installed
 * already (its sha256 is kept in the guest). Returns apt's output, or
 * undefined when nothing was done.
 */
export async function ensureDebInstalled(vm: VmNode, deb: string): Promise<string | undefined> {
  const sum = (await runCommand("sha256sum", [deb])).stdout.split(" ")[0] ?? "";
  const marker = "/var/lib/cridock-test-deb.sha256";
  const installed = (await vm.ssh(`dpkg-query -W -f='\${Status}' cridock 2>/dev/null | grep -q 'ok installed' && cat ${marker}`)).stdout.trim();
  if (sum && installed === sum) return undefined;
  const out = await installDeb(vm, deb);
  await vm.run(`echo ${sum} >${marker}`);
  return out;
}

/**
 * Builds the self-contained executable and the .deb on the host, as
 * scripts/test.sh's packaging step does (xz level 1: the fast build).
 */
export async function buildDeb(timeoutMs = 900_000): Promise<string> {
  const binary = await runCommand(join(REPO_ROOT, "node_modules/.bin/tsx"), ["scripts/build/binary.ts"], { timeoutMs });
  if (binary.status !== 0) throw new Error(describe("scripts/build/binary.ts", binary, timeoutMs));
  return buildDebAs(CRIDOCK_VERSION, timeoutMs);
}

/** crictl in the guest, against the cridock its .deb installed (the units' socket). */
export const GUEST_CRICTL = "crictl --runtime-endpoint unix:///var/run/cridock.sock --timeout 60s";

/**
 * Whether cridock in the guest reports user namespaces for its default
 * runtime handler (crictl in the guest). crictl prints the handlers with the
 * proto's field names; the default handler's name is "" (left out).
 */
export async function nodeHasUserns(vm: VmNode): Promise<boolean> {
  const info = JSON.parse(await vm.run(`${GUEST_CRICTL} info`, { timeoutMs: 180_000 })) as {
    runtimeHandlers?: { name?: string; features?: { user_namespaces?: boolean } }[];
  };
  return info.runtimeHandlers?.find((h) => !h.name)?.features?.user_namespaces === true;
}

/**
 * Copies the .deb into the guest and installs it as an operator does:
 * `apt-get install ./cridock_<version>_amd64.deb`. The guest has no
 * network, so apt could download nothing: what the package depends on and
 * recommends is in the image. (apt's --no-download would say so outright,
 * but apt 2.6 refuses a local .deb with it: "Internal Error, Pathname to
 * install is not absolute".) Returns apt's output.
 */
export async function installDeb(vm: VmNode, deb = DEB_PATH, options: { allowDowngrades?: boolean } = {}): Promise<string> {
  const name = basename(deb);
  await vm.copy(deb, `/root/${name}`);
  const flags = options.allowDowngrades ? "-y --allow-downgrades" : "-y";
  return vm.run(`cd /root && DEBIAN_FRONTEND=noninteractive apt-get install ${flags} ./${name} 2>&1`, { timeoutMs: 600_000 });
}

/**
 * The .deb of the executable already built (by buildDeb or scripts/test.sh),
 * packaged again under VERSION: a second build of the same tree, for
 * upgrades and downgrades. Returns its path.
 */
export async function buildDebAs(version: string, timeoutMs: number): Promise<string> {
  const deb = await runCommand("bash", ["scripts/build/deb.sh"], { timeoutMs, env: { CRIDOCK_DEB_XZ_LEVEL: "1", CRIDOCK_DEB_VERSION: version } });
  if (deb.status !== 0) throw new Error(describe("scripts/build/deb.sh", deb, timeoutMs));
  return join(REPO_ROOT, `dist/cridock_${version}_amd64.deb`);
}

/** Writes a `docker load` tarball of one image with one layer, as scripts/env/images/build.ts builds the test images. */
export async function writeImageArchive(path: string, contents: LayerEntry[], config: ImageRunConfig, tags: string[]): Promise<void> {
  const image = imageConfig(config, [await buildLayer(contents)], `cridock scripts/env/images: ${tags[0]}`);
  await writeDockerArchive(path, image, tags);
}

/**
 * The pause image cridock starts sandboxes from by default
 * (registry.k8s.io/pause:3.10.2, the test catalog's static pause), as a
 * tarball at PATH: the guest cannot pull it, and `cridock check` fails
 * while the node lacks it.
 */
export async function writePauseArchive(path: string): Promise<void> {
  const pause = CATALOG.find((spec) => spec.tags.includes(DEFAULT_PAUSE_IMAGE));
  if (!pause) throw new Error(`the image catalog has no ${DEFAULT_PAUSE_IMAGE}`);
  await writeImageArchive(path, pause.contents(), pause.config, [DEFAULT_PAUSE_IMAGE]);
}

/** `docker load` of a host tarball into the guest's dockerd. */
export async function loadImage(vm: VmNode, archive: string): Promise<void> {
  const guestPath = `/root/${basename(archive)}`;
  await vm.copy(archive, guestPath);
  await vm.run(`docker load --quiet --input ${guestPath} && rm ${guestPath}`, { timeoutMs: 300_000 });
}

/** The host as the guest reaches it (VM_HOST_ADDR in scripts/vm/node.sh): port 443 there is the host's mirror registry. */
export const VM_HOST_ADDR = "10.0.2.100";

/**
 * Lets the guest's dockerd pull what the host's pulls from the test
 * environment's mirror registry (docs/testing.md, "The test environment"): each of
 * MIRRORED_REGISTRIES resolves to VM_HOST_ADDR in the guest's /etc/hosts
 * (one marked line), and dockerd trusts the mirror's CA for it
 * (/etc/docker/certs.d, read at each pull). The mirror must be up on the
 * host (scripts/env/setup.sh).
 */
export async function trustHostMirror(vm: VmNode): Promise<void> {
  await vm.copy(MIRROR_CA_FILE, "/root/cridock-mirror-ca.crt");
  const marker = "# cridock test mirror registry";
  const certs = MIRRORED_REGISTRIES.map((host) => `install -D -m 0644 /root/cridock-mirror-ca.crt /etc/docker/certs.d/${host}/ca.crt`).join(" && ");
  await vm.run(`grep -qF '${marker}' /etc/hosts || echo '${VM_HOST_ADDR} ${MIRRORED_REGISTRIES.join(" ")} ${marker}' >>/etc/hosts; ${certs}`);
}
