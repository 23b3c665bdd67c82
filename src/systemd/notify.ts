/**
 * Readiness and shutdown notices to systemd (Type=notify, sd_notify(3)).
 *
 * The protocol is one datagram on the unix socket named by NOTIFY_SOCKET.
 * Neither Node nor Deno can send unix datagrams (node:dgram is UDP only),
 * and a stream connection is refused by systemd, so cridock runs systemd's
 * own `systemd-notify` client, which is present wherever systemd is.
 * `--pid=<our pid>` makes it send the message with cridock's pid in the
 * socket credentials (allowed as root), so systemd attributes it to the
 * main process; the units still set NotifyAccess=all so a systemd-notify
 * that cannot claim our pid (not root) is accepted from the service's cgroup.
 */
import { spawn } from "node:child_process";
import process from "node:process";
import type { Logger } from "../log.ts";

/** Whether systemd asked for notices (NOTIFY_SOCKET is set). */
export function notifyRequested(env: Record<string, string | undefined> = process.env): boolean {
  return Boolean(env.NOTIFY_SOCKET);
}

/** The systemd-notify arguments for a set of sd_notify assignments. */
export function notifyArgs(pid: number, assignments: Record<string, string>): string[] {
  // --no-block: no BARRIER round trip (which waits for systemd to close an fd); the
  // message carries our pid, so systemd attributes it even after systemd-notify exits.
  const args = [`--pid=${pid}`, "--no-block"];
  for (const [key, value] of Object.entries(assignments)) {
    if (/[\n=]/.test(key)) throw new Error(`invalid sd_notify key ${JSON.stringify(key)}`);
    args.push(`${key}=${value.replace(/\n/g, " ")}`);
  }
  return args;
}

/**
 * Sends `assignments` (e.g. {READY: "1", STATUS: "..."}) when NOTIFY_SOCKET
 * is set; otherwise does nothing. Never throws: a failed notice is logged
 * (systemd then times the start out, which says the same thing louder).
 */
export async function notifySystemd(assignments: Record<string, string>, log: Logger, timeoutMs = 5_000): Promise<boolean> {
  if (!notifyRequested()) return false;
  const args = notifyArgs(process.pid, assignments);
  return await new Promise<boolean>((resolve) => {
    let stderr = "";
    const child = spawn("systemd-notify", args, { stdio: ["ignore", "ignore", "pipe"] });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", (err) => {
      clearTimeout(timer);
      log.warn({ err, args }, "cannot run systemd-notify; systemd was not told");
      resolve(false);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(true);
      else {
        log.warn({ code, stderr: stderr.trim(), args }, "systemd-notify failed; systemd was not told");
        resolve(false);
      }
    });
  });
}
