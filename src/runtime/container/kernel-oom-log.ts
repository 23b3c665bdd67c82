/**
 * Which containers the kernel's OOM killer struck, read from the kernel log.
 *
 * Docker's State.OOMKilled comes from containerd's OOM event, and that event
 * can be missed: a process that outgrows its limit within milliseconds of
 * starting (critest's `dd bs=20M` under 15 MiB) is sometimes killed before
 * the shim watches the cgroup, and Docker then reports exit 137 with
 * OOMKilled false (6 of about 680 runs with Engine 29 on the cgroup v1 test
 * host, Docker alone).
 * The kernel logs every kill, naming the task's memory cgroup, whose last
 * path element carries the container id under both cgroup drivers
 * (`/docker/<id>`, `…/docker-<id>.scope`). ContainerStatus asks here only
 * when Docker says a SIGKILLed container was not OOM-killed.
 *
 * The log is read on demand, never polled: /dev/kmsg opened non-blocking,
 * each read returning one record, until EAGAIN. The descriptor stays open, so
 * later reads see only the records logged since; a record the ring buffer
 * dropped before it was read (EPIPE) is lost, and the answer is then Docker's.
 */
import fs from "node:fs";
import type { Logger } from "../../log.ts";

/** At most this many OOM-killed container ids are remembered (oldest forgotten first). */
const MAX_REMEMBERED = 4096;
/** /dev/kmsg records are at most about 1 KiB of text; a read needs room for a whole one. */
const READ_BUFFER_BYTES = 16 * 1024;
/** A kmsg record: "priority,sequence,microseconds,flags;message", continuation lines after it. */
const RECORD = /^\d+,\d+,\d+,[^;]*;(.*)$/;
const TASK_MEMCG = /task_memcg=([^,\s]*)/;
/** A container's cgroup: the id is its last path element, alone or as docker-<id>.scope. */
const CONTAINER_CGROUP = /(?:^|\/|-)([0-9a-f]{64})(?:\.scope)?$/;

/** The container whose memory cgroup a kernel "oom-kill:" message names, if any. */
export function oomKilledContainer(message: string): string | undefined {
  if (!message.startsWith("oom-kill:")) return undefined;
  const memcg = TASK_MEMCG.exec(message)?.[1];
  return memcg ? CONTAINER_CGROUP.exec(memcg)?.[1] : undefined;
}

export interface OomKillLookup {
  /** Whether the kernel log shows an OOM kill in the container's memory cgroup. */
  killedIn(containerId: string): boolean;
}

export class KernelOomLog implements OomKillLookup {
  private fd: number | undefined;
  private unavailable = false;
  private readonly killed = new Set<string>();
  private readonly buffer = Buffer.alloc(READ_BUFFER_BYTES);
  /** A record split across reads of a regular file (tests); kmsg never splits one. */
  private partial = "";

  constructor(
    private readonly log: Logger,
    private readonly path = "/dev/kmsg",
  ) {}

  killedIn(containerId: string): boolean {
    if (!this.killed.has(containerId)) this.readNew();
    return this.killed.has(containerId);
  }

  close(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }

  private readNew(): void {
    const fd = this.open();
    if (fd === undefined) return;
    for (;;) {
      let read: number;
      try {
        read = fs.readSync(fd, this.buffer, 0, this.buffer.length, null);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") return;
        // Records were overwritten before this reader got to them; reading goes on from the oldest kept.
        if (code === "EPIPE") continue;
        this.log.warn({ err, path: this.path }, "reading the kernel log failed; OOM kills are Docker's word alone until restart");
        this.close();
        this.unavailable = true;
        return;
      }
      if (read === 0) return;
      this.take(this.partial + this.buffer.toString("utf8", 0, read));
    }
  }

  private take(text: string): void {
    const lines = text.split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      const message = RECORD.exec(line)?.[1];
      const id = message === undefined ? undefined : oomKilledContainer(message);
      if (id) this.remember(id);
    }
  }

  private remember(id: string): void {
    this.killed.delete(id);
    this.killed.add(id);
    if (this.killed.size > MAX_REMEMBERED) this.killed.delete(this.killed.values().next().value!);
  }

  private open(): number | undefined {
    if (this.fd !== undefined || this.unavailable) return this.fd;
    try {
      this.fd = fs.openSync(this.path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    } catch (err) {
      this.unavailable = true;
      this.log.warn({ err, path: this.path }, "cannot read the kernel log; OOM kills are Docker's word alone");
    }
    return this.fd;
  }
}
