/**
 * Waits for a container's "die" event on a dockerd. A deleted pod's
 * container can be removed right after it exits (kubelet's container
 * deletor acts on PLEG's ContainerDied), so polling inspect may find it
 * already gone; the event carries the exit code and the time either way.
 * Start the watch before the action that stops the container.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface ContainerDeath {
  exitCode: number;
  /** Date.now() when the event reached the test. */
  at: number;
}

export function watchDie(endpoint: string, id: string, timeoutMs: number): Promise<ContainerDeath> {
  const child = spawn(
    "docker",
    ["-H", endpoint, "events", "--format", "{{json .}}", "--filter", `container=${id}`, "--filter", "event=die"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  return new Promise<ContainerDeath>((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`no die event for ${id} within ${timeoutMs} ms`)), timeoutMs);
    const finish = (result: ContainerDeath | Error) => {
      clearTimeout(timer);
      child.kill();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    child.on("error", (err) => finish(new Error(`docker events for ${id}: ${err.message}`, { cause: err })));
    createInterface({ input: child.stdout! }).once("line", (line) => {
      const event = JSON.parse(line) as { Actor?: { Attributes?: Record<string, string> } };
      finish({ exitCode: Number(event.Actor?.Attributes?.exitCode ?? NaN), at: Date.now() });
    });
  });
}
