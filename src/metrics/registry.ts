/**
 * cridock's Prometheus metrics: one prom-client Registry holding every
 * series, and the observer methods the rest of the program reports into.
 * The backends (docker/, network/, logs/) know nothing of Prometheus: they
 * take small observer callbacks or keep plain counters that are read here at
 * scrape time. Labels are bounded sets (RPC names, gRPC codes, Docker
 * endpoint templates, CNI operations, states), never ids or paths.
 */
import client from "prom-client";
import type { DockerRequestOutcome } from "../docker/observer.ts";
import { dockerEndpointTemplate } from "./docker-endpoint.ts";
import type { RpcObserver } from "./rpc.ts";

export const PREFIX = "cridock_";

/** Latency buckets from 1 ms (a cached list) to 2 min (a slow pull or stop). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const PULL_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export interface ObjectCounts {
  sandboxes: Record<string, number>;
  containers: Record<string, number>;
}

export interface LogTotals {
  bytesWritten: number;
  lostEvents: number;
  lostBytes: number;
}

/**
 * What the process holds per container or per request, read at scrape time:
 * each returns to its idle level when pods come and go (scripts/bench/soak.ts
 * --per-hour checks it under churn).
 */
export interface HeldResources {
  /** Log followers by state: `copying` a running container's output, `done` and kept until its removal. */
  logFollowers: { copying: number; done: number };
  /** Open connections to dockerd by pool (hijacked exec/attach streams not counted). */
  dockerConnections: { quick: number; long: number };
}

export interface MetricsSources {
  /** Sandboxes and containers by CRI state, read at scrape time. */
  objectCounts?: () => Promise<ObjectCounts>;
  /** Monotonic totals kept by the log writers. */
  logTotals?: () => LogTotals;
  /** Log followers and Docker connections, read at scrape time. */
  held?: () => HeldResources;
  /** Monotonic totals of the OCI layer's rootfs sweep (oci/rootfs-sweeper.ts). */
  rootfsSweep?: () => RootfsSweepTotals;
  /** The OCI runtime layer's re-registrations by result (registered, failed, refused), running totals. */
  ociLayerReregistrations?: () => Record<string, number>;
}

export interface RootfsSweepTotals {
  released: number;
  errors: number;
}

export class CridockMetrics implements RpcObserver {
  readonly registry = new client.Registry();
  private readonly rpcTotal;
  private readonly rpcDuration;
  private readonly dockerDuration;
  private readonly dockerErrors;
  private readonly cniDuration;
  private readonly stepDuration;
  private readonly cniErrors;
  private readonly pullTotal;
  private readonly pullBytes;
  private readonly pullDuration;
  private sources: MetricsSources = {};
  /** One listing serves both state gauges of a scrape (they are collected concurrently). */
  private counting: Promise<ObjectCounts | undefined> | undefined;

  constructor(options: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    // Every family carries the prefix and lives in this registry only.
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
      new client.Counter<L>({ name: `${PREFIX}${name}`, help, labelNames, registers });
    const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets = LATENCY_BUCKETS) =>
      new client.Histogram<L>({ name: `${PREFIX}${name}`, help, labelNames, buckets, registers });
    this.rpcTotal = counter("cri_requests_total", "CRI calls by service, method and gRPC status code", ["service", "method", "code"]);
    this.rpcDuration = histogram("cri_request_duration_seconds", "Latency of CRI calls (streams: until the stream ends)", ["service", "method"]);
    this.dockerDuration = histogram(
      "docker_request_duration_seconds",
      "Latency of Docker Engine API requests until dockerd's answer headers, by endpoint template",
      ["method", "endpoint"],
    );
    this.dockerErrors = counter(
      "docker_request_errors_total",
      "Failed Docker Engine API requests by endpoint template and reason (HTTP status code, unreachable, timeout, cancelled)",
      ["method", "endpoint", "reason"],
    );
    this.cniDuration = histogram(
      "cni_operation_duration_seconds",
      "Latency of attaching (ADD) and detaching (DEL) a pod through its CNI plugin list",
      ["operation"],
    );
    this.cniErrors = counter("cni_operation_errors_total", "Failed CNI ADD and DEL operations", ["operation"]);
    this.stepDuration = histogram(
      "operation_step_duration_seconds",
      'Time of each step of RunPodSandbox, StopPodSandbox, RemovePodSandbox, CreateContainer, StartContainer and ExecSync (Docker calls, CNI plugin execs, netns pinning, checkpoint writes); step "total" is the whole operation',
      ["operation", "step"],
    );
    this.pullTotal = counter("image_pulls_total", "Image pulls by result (success, failure)", ["result"]);
    this.pullBytes = counter(
      "image_pull_bytes_total",
      "Bytes downloaded by successful image pulls, as dockerd's progress reports them (layers already present count nothing)",
    );
    this.pullDuration = histogram("image_pull_duration_seconds", "Time an image pull took, by result", ["result"], PULL_BUCKETS);
    const sources = () => this.sources;
    const counts = () => this.objectCounts();
    // A gauge with one label whose series are reset and refilled at each
    // scrape from `read` (nothing is changed when it has no answer).
    const labelledGauge = (
      name: string,
      help: string,
      labelName: string,
      read: () => Record<string, number> | undefined | Promise<Record<string, number> | undefined>,
    ) =>
      new client.Gauge({
        name: `${PREFIX}${name}`,
        help,
        labelNames: [labelName],
        registers,
        async collect() {
          const values = await read();
          if (!values) return;
          this.reset();
          for (const [label, n] of Object.entries(values)) this.set({ [labelName]: label }, n);
        },
      });
    // One gauge per kind of object, both filled from one count at each scrape.
    const stateGauge = (name: string, help: string, kind: keyof ObjectCounts) =>
      labelledGauge(name, help, "state", async () => (await counts())?.[kind]);
    stateGauge("pod_sandboxes", "Pod sandboxes by CRI state (SANDBOX_READY, SANDBOX_NOTREADY)", "sandboxes");
    stateGauge("containers", "Containers by CRI state (CONTAINER_CREATED, CONTAINER_RUNNING, CONTAINER_EXITED, CONTAINER_UNKNOWN)", "containers");
    // The log writers keep plain running totals; each scrape copies one of them into its counter.
    const logTotalCounter = (name: string, help: string, field: keyof LogTotals) =>
      new client.Counter({
        name: `${PREFIX}${name}`,
        help,
        registers,
        collect() {
          const totals = sources().logTotals?.();
          if (totals) this.reset(), this.inc(totals[field]);
        },
      });
    logTotalCounter("container_log_bytes_total", "Bytes written to CRI container log files", "bytesWritten");
    logTotalCounter(
      "container_log_lost_total",
      "Occasions on which Docker rotated container output away before cridock copied it into the CRI log",
      "lostEvents",
    );
    logTotalCounter(
      "container_log_lost_bytes_total",
      "Bytes of container output known to be lost to Docker's log rotation (a lower bound: whole files rotated away unseen have no known size)",
      "lostBytes",
    );
    // The OCI layer's sweep keeps plain totals too.
    const sweepCounter = (name: string, help: string, field: keyof RootfsSweepTotals) =>
      new client.Counter({
        name: `${PREFIX}${name}`,
        help,
        registers,
        collect() {
          const totals = sources().rootfsSweep?.();
          if (totals) this.reset(), this.inc(totals[field]);
        },
      });
    sweepCounter(
      "oci_rootfs_swept_total",
      "Container directories of the OCI layer's idmapped rootfs that the periodic sweep released (left by a delete that never came)",
      "released",
    );
    sweepCounter(
      "oci_rootfs_sweep_errors_total",
      "Container directories of the OCI layer's idmapped rootfs that the periodic sweep could not release (each attempt counts; the log names the container and why)",
      "errors",
    );
    new client.Counter({
      name: `${PREFIX}oci_layer_reregistrations_total`,
      help: "Registrations of the OCI runtime layer with dockerd made again after something (a tool that rewrote daemon.json) removed it, by result (registered, failed, refused)",
      labelNames: ["result"],
      registers,
      collect() {
        const totals = sources().ociLayerReregistrations?.();
        if (!totals) return;
        this.reset();
        for (const [result, n] of Object.entries(totals)) this.inc({ result }, n);
      },
    });
    // Gauges of what the process holds, one series per state or pool.
    const heldGauge = (name: string, help: string, labelName: string, read: (held: HeldResources) => Record<string, number>) =>
      labelledGauge(name, help, labelName, () => {
        const held = sources().held?.();
        return held && read(held);
      });
    heldGauge(
      "log_followers",
      "Containers whose output cridock copies into CRI logs (copying), or has copied and keeps until the container is removed (done)",
      "state",
      (held) => held.logFollowers,
    );
    heldGauge(
      "docker_connections",
      "Open connections to dockerd, by pool: quick requests, and long-held ones (log follows, events, waits, pulls); hijacked exec/attach streams not counted",
      "pool",
      (held) => held.dockerConnections,
    );
    if (options.processMetrics ?? true) client.collectDefaultMetrics({ register: this.registry, prefix: PREFIX });
  }

  /** Connects the scrape-time sources once the components exist. */
  setSources(sources: MetricsSources): void {
    this.sources = sources;
  }

  rpc(service: string, method: string, code: string, seconds: number): void {
    this.rpcTotal.inc({ service, method, code });
    this.rpcDuration.observe({ service, method }, seconds);
  }

  dockerRequest(method: string, path: string, seconds: number, outcome: DockerRequestOutcome): void {
    const endpoint = dockerEndpointTemplate(path);
    this.dockerDuration.observe({ method, endpoint }, seconds);
    if (outcome.error) {
      const reason = outcome.error === "http" && outcome.statusCode ? String(outcome.statusCode) : outcome.error;
      this.dockerErrors.inc({ method, endpoint, reason });
    }
  }

  /** One finished step of an operation's step timer (src/steps.ts). */
  operationStep(operation: string, step: string, seconds: number): void {
    this.stepDuration.observe({ operation, step }, seconds);
  }

  cniOperation(operation: "ADD" | "DEL", seconds: number, ok: boolean): void {
    this.cniDuration.observe({ operation }, seconds);
    if (!ok) this.cniErrors.inc({ operation });
  }

  imagePull(seconds: number, result: { ok: true; bytes: number } | { ok: false }): void {
    const label = result.ok ? "success" : "failure";
    this.pullTotal.inc({ result: label });
    this.pullDuration.observe({ result: label }, seconds);
    if (result.ok && result.bytes > 0) this.pullBytes.inc(result.bytes);
  }

  /** The exposition text (`text/plain; version=0.0.4`). */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private objectCounts(): Promise<ObjectCounts | undefined> {
    if (!this.counting) {
      const source = this.sources.objectCounts;
      const result = source ? source().catch(() => undefined) : Promise.resolve(undefined);
      // Shared by the collects that start while it runs (both gauges of one scrape), then dropped.
      this.counting = result.finally(() => {
        this.counting = undefined;
      });
    }
    return this.counting;
  }
}
